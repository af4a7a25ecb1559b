"""``streamkm completion bash``: the generated script completes sub-commands, options and
choices in a real bash, and leaves values such as ``-c FILE`` to file-name completion."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.helpers.service_process import cli

pytestmark = pytest.mark.integration

DRIVER = r'''
source "$1"
line=$2
read -ra COMP_WORDS <<< "$line"
[[ $line == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMPREPLY=()
_streamkm
echo "${COMPREPLY[*]}"
'''


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completion(tmp_path) -> None:
    proc = cli("completion", "bash")
    assert proc.returncode == 0, proc.stderr
    script = tmp_path / "streamkm.bash"
    script.write_text(proc.stdout)
    assert "complete -o default -o bashdefault -F _streamkm streamkm" in proc.stdout

    def complete(line: str) -> list[str]:
        done = subprocess.run(["bash", "-c", DRIVER, "driver", str(script), line],
                              capture_output=True, text=True, timeout=30, check=True)
        return done.stdout.split()

    assert complete("streamkm ") == ["run", "config", "demo", "checkpoint", "plot",
                                           "completion"]
    assert complete("streamkm config ") == ["show", "check"]
    assert complete("streamkm checkpoint ex") == ["export"]
    assert complete("streamkm run --on-existing-output ") == ["fail", "truncate", "append", "resume"]
    assert "--reset-model" in complete("streamkm run --")
    assert complete("streamkm checkpoint export state/ck -") == ["-h", "--help", "-o",
                                                                 "--output"]
    assert complete("streamkm run -c ") == []  # a file name: bash's default completion
