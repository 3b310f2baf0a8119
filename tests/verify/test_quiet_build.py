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
