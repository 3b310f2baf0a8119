"""An RTL build's compiler commands and warnings go to a log file, not to the terminal."""

import subprocess
import sys

from attenio.verify.runner import _output_to


def test_subprocess_output_goes_to_the_log(tmp_path, capfd):
    log = tmp_path / "build.log"
    with _output_to(log):
        code = "import sys; print('g++ -O2 x.cpp'); print('%Warning-WIDTH', file=sys.stderr)"
        subprocess.run([sys.executable, "-c", code], check=True)
    print("after")
    out, err = capfd.readouterr()
    text = log.read_text()
    assert "g++ -O2 x.cpp" in text and "%Warning-WIDTH" in text
    assert "g++" not in out + err and "Warning" not in out + err
    assert "after" in out


def test_build_cache_is_per_user_with_an_override(monkeypatch, tmp_path):
    """Compiled models are cached in the user's cache directory (one build for every working
    directory), or under $ATTENIO_BUILD when set (issue #32)."""
    from attenio.verify.runner import build_root

    monkeypatch.delenv("ATTENIO_BUILD", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build_root() == tmp_path / "xdg" / "attenio" / "sim"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert build_root() == tmp_path / "home" / ".cache" / "attenio" / "sim"
    monkeypatch.setenv("ATTENIO_BUILD", str(tmp_path / "mine"))
    assert build_root() == tmp_path / "mine" / "sim"
