"""``tasksieve sandbox build-image``: build the docker sandbox image offline from Debian."""

from __future__ import annotations

import argparse
import sys

from verifiers.sandbox.docker.image import DEFAULT_IMAGE, IMAGE_ENV, ImageBuildError, build_image


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
    )
    b.add_argument(
        "--image", help=f"image name (default: ${IMAGE_ENV} or {DEFAULT_IMAGE})", default=None
    )
    b.add_argument("--mirror", help="Debian mirror URL (default: the one apt uses)")
    b.add_argument("--force", action="store_true", help="rebuild even if the image exists")


def run(args: argparse.Namespace) -> int:
    """Run the chosen ``sandbox`` sub-command; exit 2 with one line for any failure."""
    try:
        built = build_image(args.image, mirror=args.mirror, force=args.force)
    except ImageBuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from verifiers.sandbox.docker.image import image_name

    name = image_name(args.image)
    print(f"built {name}" if built else f"{name} already exists (use --force to rebuild)")
    return 0
