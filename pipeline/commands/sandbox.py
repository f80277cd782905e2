"""``tasksieve sandbox build-image``: build the docker sandbox image offline from Debian.

The top level imports the standard library only (the CLI builds its parser from here).
"""

from __future__ import annotations

import argparse
import json
import sys

from tasksieve.pipeline.flags.shared import add_format_flag


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``sandbox`` and its ``build-image`` sub-command."""
    p = sub.add_parser("sandbox", help="manage sandbox backends (the docker image)")
    actions = p.add_subparsers(dest="sandbox_command", metavar="COMMAND")
    actions.required = True
    b = actions.add_parser(
        "build-image",
        help="build the docker sandbox image with debootstrap (no image registry needed)",
        description="Skips when the image exists unless --force. Needs root, debootstrap, a "
        "running Docker engine and a Debian mirror.",
        epilog='output (--format json): {"image": NAME, "built": true|false}. '
        "exit status: 0 built or already there, 2 the build failed",
    )
    b.add_argument(
        "--image",
        help="image name (default: $TASKSIEVE_SANDBOX_IMAGE, else the sandbox's default)",
        default=None,
    )
    b.add_argument("--mirror", help="Debian mirror URL (default: the one apt uses)")
    b.add_argument("--force", action="store_true", help="rebuild even if the image exists")
    add_format_flag(b, "result on stdout: a line (text) or one JSON object (json)")


def run(args: argparse.Namespace) -> int:
    """Run the chosen ``sandbox`` sub-command; exit 2 with one line for any failure."""
    from tasksieve.verifiers.sandbox.docker.image import ImageBuildError, build_image, image_name

    try:
        built = build_image(args.image, mirror=args.mirror, force=args.force)
    except ImageBuildError as e:
        print(f"tasksieve sandbox build-image: error: {e}", file=sys.stderr)
        return 2
    name = image_name(args.image)
    if args.format == "json":
        print(json.dumps({"image": name, "built": built}))
    else:
        print(f"built {name}" if built else f"{name} already exists (use --force to rebuild)")
    return 0
