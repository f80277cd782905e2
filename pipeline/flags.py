"""Command-line flags shared by several subcommands (their settings must agree)."""

from __future__ import annotations

import argparse

from transforms.dedup import DedupConfig


def add_dedup_flags(p: argparse.ArgumentParser) -> None:
    """Near-dedup flags (shared by curate and dedup-index add, whose settings must agree)."""
    p.add_argument("--near-threshold", type=float, default=0.8)
    p.add_argument("--dedup-index", help="near-dedup index of earlier runs (directory)")
    p.add_argument("--shingle", default="word", choices=["word", "code", "char"])
    p.add_argument("--shingle-size", type=int, default=3)
    p.add_argument("--num-perm", type=int, default=128, help="MinHash permutations")
    p.add_argument("--canonical-ids", action="store_true", help="renamed identifiers match")
    p.add_argument("--strip-comments", action="store_true")
    p.add_argument("--strip-docstrings", action="store_true")
    p.add_argument("--no-near-dedup", action="store_true")


def dedup_config(args: argparse.Namespace) -> DedupConfig:
    """DedupConfig from the near-dedup flags."""
    return DedupConfig(
        near_threshold=args.near_threshold,
        shingle_size=args.shingle_size,
        num_perm=args.num_perm,
        enabled=not args.no_near_dedup,
        shingle_kind=args.shingle,
        strip_comments=args.strip_comments,
        strip_docstrings=args.strip_docstrings,
        canonical_identifiers=args.canonical_ids,
        index_path=args.dedup_index,
    )
