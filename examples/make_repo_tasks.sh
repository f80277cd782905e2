#!/usr/bin/env bash
# Regenerate the synthesized repo tasks: examples/tasks/repo.jsonl and examples/snapshots/.
# Needs PyPI (pip download of three source distributions) and the process sandbox.
# Usage: examples/make_repo_tasks.sh [PYTHON]   (run from the repository root; `make examples-repo`)
set -euo pipefail
PY=${1:-.venv/bin/python}
OUT=examples/tasks/repo.jsonl
STORE=examples/snapshots
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# name==version | extra synth flags (docs, changelogs and packaging leftovers stay out)
PACKAGES=(
  "inflection==0.5.1|"
  "parse==1.20.2|"
  "toml==0.10.2|--test-arg=--deselect=tests/test_api.py::test_valid_tests --test-arg=--deselect=tests/test_api.py::test_invalid_tests"
)
EXCLUDE=(--exclude 'docs/**' --exclude 'documentation/**' --exclude 'CHANGE*' --exclude 'MANIFEST.in'
         --exclude '.gitignore' --exclude '**/*.pyi' --exclude 'tests/*.sh' --exclude 'PKG-INFO')

if [ -d "$STORE" ]; then chmod -R u+w "$STORE"; rm -rf "$STORE"; fi
rm -f "$OUT"
for entry in "${PACKAGES[@]}"; do
  spec=${entry%%|*}; extra=${entry#*|}
  "$PY" -m pip download -q --no-deps --no-binary :all: "$spec" -d "$WORK/dl"
  name=${spec%%==*}; version=${spec##*==}
  tar -xzf "$WORK/dl/$name-$version.tar.gz" -C "$WORK"
  # shellcheck disable=SC2086
  "$PY" -m tasksieve.pipeline.cli synth repo --project "$WORK/$name-$version" --output "$OUT" \
    --append --snapshot-store "$STORE" --max-tasks 11 --seed 0 "${EXCLUDE[@]}" $extra
done
"$PY" -m tasksieve.transforms.synth.replay --tasks "$OUT" --append examples/replay/completions.jsonl
"$PY" -m tasksieve.pipeline.cli validate "$OUT"
