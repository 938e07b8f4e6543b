"""Start ``python PYTHON_ARGS`` as a child of a fork server (``fork_server.py``) and stand
in for it: ``python -S fork_client.py SOCKET [--pid-file PATH] PYTHON_ARGS...``, where
``PYTHON_ARGS`` is ``-m MODULE ARGS`` or ``[-u] [-B] -c CODE ARGS`` (the server runs those).

The client sends the server its arguments, working directory, environment and its three
standard streams (the descriptors themselves, so the child writes where the client's
caller reads), then waits. It passes SIGTERM and SIGINT on to the child, and ends as the
child ended: with its exit status, or killed by the same signal. If the client itself is
killed, the server sees its connection close and kills the child. With ``--pid-file`` the
child writes its pid there before it runs its program (for a caller that must kill the
child itself, and know it dead when the client has ended).

Only the standard library, and only what it needs: the client's own start is the cost a
start through the server still pays.
"""

import json
import os
import signal
import socket
import sys

#: How long the client waits for the server to fork the child and say its pid.
START_TIMEOUT_S = 30.0
#: The largest reply the server sends (a small JSON object).
REPLY_BYTES = 4096


def main(argv: list[str]) -> int:
    socket_path, *rest = argv
    pid_file = None
    if rest[:1] == ["--pid-file"]:
        pid_file, rest = rest[1], rest[2:]
    request = {
        "argv": rest,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "pid_file": pid_file,
    }
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    connection.settimeout(START_TIMEOUT_S)
    connection.connect(socket_path)
    socket.send_fds(connection, [json.dumps(request).encode()], [0, 1, 2])
    started = connection.recv(REPLY_BYTES)
    if not started:
        print(
            f"fork_client: the server at {socket_path} did not start {' '.join(rest)[:80]}",
            file=sys.stderr,
        )
        return 1
    pid = json.loads(started)["pid"]

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    # The child runs as long as it runs: its caller bounds it (and kills this client,
    # which kills the child).
    connection.settimeout(None)
    ended = connection.recv(REPLY_BYTES)
    if not ended:
        print("fork_client: the server ended before the child", file=sys.stderr)
        return 1
    code = json.loads(ended)["returncode"]
    if code < 0:  # killed by a signal: end the same way, as the caller would have seen it
        if -code not in (signal.SIGKILL, signal.SIGSTOP):  # those have no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        return 128 - code  # a signal that does not end a process: as a shell reports it
    return int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
