"""The guest shell's wire format: how a command is quoted for ``eval`` and how the shell's
status report after it is read, checked against a real bash, then end to end in a session."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tasksieve.verifiers.sandbox.guest.wsshell import _STATUS, bash_quote, parse_status
from tasksieve.verifiers.sandbox.process.sandbox import ProcessSandbox
from tasksieve.verifiers.sandbox.workspace import WorkspaceSpec

AWKWARD = [
    "",
    "plain words",
    "it's",
    "''''",
    "'\\''",
    "a\\b\\\\c",
    "\"$HOME\" `id` $(id) ${x:-y} $'\\x41'",
    "two\nlines\n\n",
    "tab\there; semi; & pipe | star * glob ? [a] ~",
    "unicode: é ü 漢字 🙂",
    "\x01\x1f\x1e\x7f control",
    "x" * 20000 + "'" + "y" * 3,
]


def _printed(word: str) -> bytes:
    """What a real bash prints for ``printf %s WORD``."""
    argv = ["bash", "--noprofile", "--norc", "-c", f"printf %s {word}"]
    return subprocess.run(argv, capture_output=True, check=True).stdout


@pytest.mark.parametrize("text", AWKWARD)
def test_bash_quote_is_one_word_bash_reads_back_exactly(text: str) -> None:
    assert _printed(bash_quote(text)) == text.encode()


def test_bash_quote_is_short_for_text_without_quotes() -> None:
    text = "python3 - <<'EOF'\nprint(1)\nEOF"  # a heredoc agents send
    assert len(bash_quote(text)) == len(text) + 2 + 3 * text.count("'")


def test_bash_quote_of_a_nul_is_cut_there_by_bash_as_before() -> None:
    assert _printed(bash_quote("a\0b")) == b"a"


def _report(script: str) -> bytes:
    """What bash writes on fd 3 for ``script`` (fd 3 a pipe read here)."""
    r, w = os.pipe()
    try:
        proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "-c", f"exec 3>&{w}; {script}"],
            pass_fds=(w,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        os.close(w)
        w = -1
        chunks = []
        while chunk := os.read(r, 65536):
            chunks.append(chunk)
        proc.wait(timeout=30)
        return b"".join(chunks)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_status_report_of_a_real_shell_is_parsed(tmp_path: Path) -> None:
    odd = tmp_path / "dir with | , and \x1f in it"
    odd.mkdir()
    script = (
        f"set -m; sleep 30 & sleep 31 & cd {bash_quote(str(odd))}; (exit 7); {_STATUS}kill %1 %2"
    )
    report = _report(script)
    rc, jobs, cwd = parse_status(report)
    assert rc == 7 and cwd == str(odd) and len(jobs) == 2 and all(j > 1 for j in jobs)
    rc, jobs, cwd = parse_status(_report(f"cd /; true; {_STATUS}"))
    assert (rc, jobs, cwd) == (0, set(), "/")


def test_session_runs_awkward_commands_exactly(snapshot: Path) -> None:
    box = ProcessSandbox()
    try:
        with box.open_workspace(WorkspaceSpec(str(snapshot))) as ws:
            for text in AWKWARD[1:]:
                r = ws.exec(f"printf %s {bash_quote(text)}")
                assert (r.exit_code, r.stdout) == (0, text.encode())
            heredoc = "cat > \"it's.txt\" <<'EOF'\nsay 'hi' \\n $HOME\nEOF\ncat \"it's.txt\""
            r = ws.exec(heredoc)
            assert r.stdout == b"say 'hi' \\n $HOME\n" and r.exit_code == 0
            # in the foreground, or the next command may run before the directory exists
            assert ws.exec("mkdir -p 'a | b' && cd 'a | b'; sleep 60 &").exit_code == 0
            r = ws.exec("(exit 5)")
            assert r.exit_code == 5
            r = ws.exec("pwd; jobs | grep -c 'sleep 60'")  # the directory and the job persist
            assert r.stdout == b"/workspace/a | b\n1\n"
            # functions named like the status report's commands do not answer for it
            assert ws.exec("jobs() { echo 1; }; printf() { echo 0; }; cd ..").exit_code == 0
            r = ws.exec("false")
            assert r.exit_code == 1 and r.ended is None
            assert ws.exec("builtin pwd").stdout == b"/workspace\n"
    finally:
        box.close()
