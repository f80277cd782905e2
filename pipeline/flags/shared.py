"""Command-line flags shared by several subcommands (their settings must agree).

Standard library only at the top: the parser is built before any command runs, so importing
``tasksieve.transforms.dedup.near`` (Beam) here would slow every command down.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tasksieve.transforms.dedup.near import DedupConfig

FORMATS = ("text", "json")


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1, with a message saying what was wrong."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def url_list(text: str) -> tuple[str, ...]:
    """The URLs of a ``--sandbox-url URL[,URL...]`` value, blanks dropped."""
    return tuple(u.strip() for u in text.split(",") if u.strip())


def add_format_flag(p: argparse.ArgumentParser, help: str) -> None:
    """``--format text|json`` (default text); json output has stable, documented field names."""
    p.add_argument("--format", choices=FORMATS, default="text", help=f"{help} (default text)")


def add_dedup_flags(p: argparse.ArgumentParser) -> None:
    """Near-dedup flags (shared by curate and dedup-index add, whose settings must agree)."""
    p.add_argument("--near-threshold", type=float, default=0.8)
    p.add_argument("--dedup-index", help="near-dedup index of earlier runs (directory)")
    p.add_argument(
        "--dedup-index-lookup",
        choices=["worker", "shuffle"],
        default="worker",
        help="how candidates meet the index: each worker loads it (default) or the index "
        "joins the shuffle (for an index larger than a worker's memory)",
    )
    p.add_argument("--shingle", default="word", choices=["word", "code", "char"])
    p.add_argument("--shingle-size", type=int, default=3)
    p.add_argument("--num-perm", type=int, default=128, help="MinHash permutations")
    p.add_argument("--canonical-ids", action="store_true", help="renamed identifiers match")
    p.add_argument("--strip-comments", action="store_true")
    p.add_argument("--strip-docstrings", action="store_true")
    p.add_argument("--no-near-dedup", action="store_true")


def dedup_config(args: argparse.Namespace) -> DedupConfig:
    """DedupConfig from the near-dedup flags."""
    from tasksieve.transforms.dedup.near import DedupConfig

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
        index_lookup=args.dedup_index_lookup,
    )
