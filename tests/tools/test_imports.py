"""The MCP client imports first in a fresh interpreter: no import cycle with the agent package."""

import subprocess
import sys


def test_mcp_client_imports_first_in_a_fresh_interpreter():
    result = subprocess.run(
        [sys.executable, "-c", "import switchboard.tools.mcp_client"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
