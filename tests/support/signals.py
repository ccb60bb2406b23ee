"""SIGINT sent to this process from a timer thread, as a terminal's Ctrl-C would arrive."""

import os
import signal
import threading
import time


def interrupt_after(delay):
    """Send SIGINT to this process after ``delay`` seconds; returns ``(sent, timer)``, ``sent``
    the dict whose ``"t"`` receives the ``time.perf_counter()`` of the signal."""
    sent = {}

    def fire():
        sent["t"] = time.perf_counter()
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(delay, fire)
    timer.start()
    return sent, timer
