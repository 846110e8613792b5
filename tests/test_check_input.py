"""`guardhook check` never passes what it did not read (issue 39): an unreadable folder, a symlink
that leads out of the folder or nowhere, are reported and exit 2; a symlink inside the tree is
followed, and a symlink loop ends. Bytes that are not UTF-8, on stdin or in a file, and an empty
folder are one plain line and exit 2 (issue 50)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from guardhook.commands.main import main

from conftest import REPO

DENIED = REPO / "tests" / "manifests" / "lws-wide-pdb"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_an_unreadable_subfolder_is_reported_and_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as root a chmod 000 folder is still readable: the listing error is raised by os.scandir
    shutil.copytree(DENIED, tmp_path / "tree" / "locked")
    locked = tmp_path / "tree" / "locked"
    real_scandir = os.scandir

    def scandir(path: os.PathLike[str] | str) -> object:
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    code, out, err = run(capsys, str(tmp_path / "tree"))
    assert code == 2
    assert out == ""
    assert f"{locked}: cannot read folder: Permission denied" in err
    assert err.count(str(locked)) == 1  # each path named once


def test_a_symlink_out_of_the_tree_is_reported_not_followed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "tree").mkdir()
    shutil.copytree(DENIED, tmp_path / "outside")
    (tmp_path / "tree" / "linked").symlink_to(tmp_path / "outside")
    code, _, err = run(capsys, str(tmp_path / "tree"))
    assert code == 2
    assert f"{tmp_path / 'tree' / 'linked'}: symlink not followed: it leads out of" in err


def test_a_dangling_symlink_is_reported(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    shutil.copytree(DENIED, tmp_path / "tree")
    (tmp_path / "tree" / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")
    code, _, err = run(capsys, str(tmp_path / "tree"))
    assert code == 2
    assert f"{tmp_path / 'tree' / 'gone.yaml'}: symlink not followed" in err


def test_a_symlink_inside_the_tree_is_followed_and_a_loop_ends(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shutil.copytree(DENIED, tmp_path / "tree" / "real")
    (tmp_path / "tree" / "alias").symlink_to(tmp_path / "tree" / "real")
    (tmp_path / "tree" / "real" / "loop").symlink_to(tmp_path / "tree")
    code, out, err = run(capsys, str(tmp_path / "tree"))
    assert code == 1, err  # the Deny inside was read and judged
    assert "Deny [group-pdb]" in out
    assert "symlink not followed" not in err and "cannot read" not in err


def test_cluster_state_with_an_unreadable_subfolder_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(DENIED, tmp_path / "state" / "locked")
    shutil.copytree(DENIED, tmp_path / "state" / "open")
    locked = tmp_path / "state" / "locked"
    real_scandir = os.scandir

    def scandir(path: os.PathLike[str] | str) -> object:
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    code, _, err = run(capsys, "--cluster-state", str(tmp_path / "state"), str(DENIED))
    assert code == 2
    assert f"{locked}: cannot read folder: Permission denied" in err


@pytest.mark.parametrize("as_state", [False, True], ids=["input", "cluster-state"])
def test_an_unreadable_file_is_named_once(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_state: bool
) -> None:
    shutil.copytree(DENIED, tmp_path / "tree")
    locked = tmp_path / "tree" / "pdb.yaml"
    real_read_bytes = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    argv = ["--cluster-state", str(tmp_path / "tree"), str(DENIED)] if as_state else [str(tmp_path / "tree")]
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert f"{locked}: cannot read: Permission denied" in err
    assert err.count(str(locked)) == 1


def test_scalars_read_as_kubectl_reads_them(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # PyYAML's YAML 1.1 made an unquoted date a date (and `check` crashed serialising it), `10:30` the
    # number 630 (Invalid: not a string) and `=` a tag it cannot build (unreadable); kubectl's YAML
    # (go-yaml v2 into JSON) reads all three as strings.
    from guardhook.cluster.view.manifests import parse_text

    text = (
        "apiVersion: v1\nkind: ConfigMap\n"
        "metadata: {name: c, namespace: serve, labels: {released: 2024-01-01}}\n"
        "data: {since: 2024-01-01, at: 2001-12-14t21:59:43.10-05:00, window: 10:30, op: =}\n"
    )
    [manifest] = parse_text(text, "c.yaml")
    assert manifest.obj["data"] == {
        "since": "2024-01-01",
        "at": "2001-12-14t21:59:43.10-05:00",
        "window": "10:30",
        "op": "=",
    }
    assert manifest.obj["metadata"]["labels"] == {"released": "2024-01-01"}
    numbers = parse_text("kind: X\nv: [12, -3, 1.5, 0x1F, 0755, 1_000, .inf, yes, ~]\n", "n.yaml")[0].obj["v"]
    assert numbers == [12, -3, 1.5, 31, 493, 1000, float("inf"), True, None]  # the rest as before
    path = tmp_path / "c.yaml"
    path.write_text(text)
    code, out, err = run(capsys, str(path))
    assert (code, out) == (0, "") and "Traceback" not in err


NOT_UTF8 = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: caf\x8f}\n"
AT = NOT_UTF8.index(0x8F)


def guardhook(*args: str, stdin: bytes = b"", cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """`guardhook ARGS` as a process, `stdin` through a real pipe (bytes, as a shell pipeline sends them)."""
    done = subprocess.run(
        [sys.executable, "-m", "guardhook", *args], input=stdin, capture_output=True, timeout=120, cwd=cwd
    )
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode())


def test_bytes_that_are_not_utf8_are_one_plain_line_on_stdin_as_by_path(tmp_path: Path) -> None:
    # stdin ended in a traceback and exit 1 ("denied" to CI); a file said Python's codec text
    path = tmp_path / "cafe.yaml"
    path.write_bytes(NOT_UTF8)
    piped = guardhook("check", "-", stdin=NOT_UTF8)
    given = guardhook("check", str(path))
    for done, source in ((piped, "-"), (given, str(path))):
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr.splitlines()[0] == (
            f"guardhook check: {source}: cannot read: not UTF-8 text (byte 0x8f at offset {AT})"
        )
        assert "Traceback" not in done.stderr and "codec" not in done.stderr
    # review: the same words, and a byte order mark read past as check reads it
    for done, source in (
        (guardhook("review", "-", stdin=NOT_UTF8), "-"),
        (guardhook("review", str(path)), path),
    ):
        assert done.returncode == 2
        assert done.stderr.splitlines() == [
            f"guardhook review: {source}: cannot read: not UTF-8 text (byte 0x8f at offset {AT})"
        ]


def test_a_byte_order_mark_is_read_past_by_check_and_review(tmp_path: Path) -> None:
    from conftest import REVIEWS

    bom = b"\xef\xbb\xbf"
    review = bom + (REVIEWS / "s02-leader-delete.validating.json").read_bytes()
    done = guardhook("review", "--format", "text", "-", stdin=review)
    assert (done.returncode, done.stdout.splitlines()[0]) == (0, "allowed"), done.stderr
    done = guardhook("check", "-", stdin=bom + NOT_UTF8.replace(b"\x8f", b"e"))
    assert done.returncode == 0, done.stderr


def test_an_empty_folder_is_said_and_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "deploy"
    (empty / "notes").mkdir(parents=True)
    (empty / "README.md").write_text("no manifests here")
    code, out, err = run(capsys, str(empty))
    assert (code, out) == (2, "")
    assert (
        f"guardhook check: {empty}: the folder holds no manifest file (.yaml, .yml, .json)"
        in err.splitlines()
    )
    code, out, err = run(capsys, str(empty), str(DENIED))  # beside others: still a wrong path
    assert code == 2 and "[group-pdb]" in out


def test_no_skipped_policy_note_when_no_file_could_be_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # "group-capacity skipped: no Nodes" spoke of a check that judged nothing at all
    path = tmp_path / "cafe.yaml"
    path.write_bytes(NOT_UTF8)
    code, _, err = run(capsys, str(path))
    assert code == 2 and "group-capacity skipped" not in err
    code, _, err = run(capsys, str(DENIED))
    assert "group-capacity skipped: no Nodes" in err  # said when something was judged
