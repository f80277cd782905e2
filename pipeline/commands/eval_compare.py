"""``tasksieve eval compare A B``: run the comparison and print it (imported when it runs)."""

from __future__ import annotations

import argparse
import json
import sys

EXIT_OK, EXIT_USAGE = 0, 2


def run_compare(args: argparse.Namespace) -> int:
    """Compare eval B with eval A; print a table or one JSON object; 2 on a bad input."""
    from tasksieve.pipeline.eval.compare import CompareError, compare, render_compare

    if args.resamples < 100:
        print(
            f"tasksieve eval compare: error: --resamples must be >= 100, got {args.resamples}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        result = compare(args.a, args.b, args.resamples)
    except CompareError as exc:
        print(f"tasksieve eval compare: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(result) if args.format == "json" else render_compare(result))
    return EXIT_OK
