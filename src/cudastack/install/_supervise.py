"""Run an installer so that it dies with cudastack, children and grandchildren included.

Run by cudastack's own interpreter as ``python -I -S _supervise.py LIFE_FD STATUS_FD CMD...``, in
a session and process group of its own (the parent starts it with ``setsid``). The installer and
everything it starts (build backends, compilers) stay in this group. The supervisor watches
``LIFE_FD``, the read end of a pipe whose only write end cudastack holds: the kernel closes it
when cudastack exits for any reason, SIGKILL included, and the supervisor then kills the whole
group. When the installer exits, its status goes to ``STATUS_FD`` and whatever it left running
in the group is killed too. ``PR_SET_PDEATHSIG`` alone would cover only the direct child.

Standard library only, nothing of cudastack imported: it must start fast and cannot fail on an
import.
"""

import os
import select
import signal
import subprocess
import sys


def main() -> None:
    life, status = int(sys.argv[1]), int(sys.argv[2])
    cmd = sys.argv[3:]
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # cudastack decides; a terminal's ^C is not ours
    try:
        child = subprocess.Popen(cmd)  # same group; stdio inherited; LIFE/STATUS not (close_fds)
    except OSError as exc:
        os.write(status, f"error {exc}".encode())
        os._exit(127)
    poll = select.poll()
    poll.register(life, select.POLLIN | select.POLLHUP | select.POLLERR)
    while True:
        if poll.poll(100):  # EOF: cudastack is gone (or closed the pipe to stop us)
            os.killpg(0, signal.SIGKILL)
        rc = child.poll()
        if rc is not None:
            os.write(status, str(rc).encode())
            os.close(status)
            os.killpg(0, signal.SIGKILL)  # whatever the installer left behind, and this process


if __name__ == "__main__":
    main()
