"""The probe listener of the real binary is not starvable (server/http_server.h, "Connection
budgets"): while clients on 127.0.0.1 hold many idle connections to the debug listener, or
trickle line ends into the probe listener itself, /healthz answers a kubelet-like probe (a new
connection each time, a 1 s timeout) every time, and the daemon stays up.

The daemon before the per-listener budgets fails both: its 32 connections were shared by both
listeners and refused past that, and line ends before a request line never started the head
deadline."""
import http.client
import select
import socket
import threading
import time

from conftest import wait_for

# More than either listener's budget (server/admin_server.h: 16 probe, 8 debug connections) and
# than the 32 once shared by both.
ATTACKERS = 40


def host_port(url):
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def healthz(probe, timeout=1.0):
    """(status, body) of GET /healthz on a new connection, closed after, as the kubelet probes
    (timeoutSeconds 1 by default); (None, error) when there was no answer."""
    conn = http.client.HTTPConnection(*host_port(probe), timeout=timeout)
    try:
        conn.request("GET", "/healthz", headers={"Connection": "close"})
        r = conn.getresponse()
        return r.status, r.read().decode()
    except (OSError, http.client.HTTPException) as e:
        return None, repr(e)
    finally:
        conn.close()


class Prober:
    """Probes /healthz about every 100 ms on a thread until stopped; keeps every outcome."""

    def __init__(self, probe):
        self.probe = probe
        self.results = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self):
        while not self._stop.is_set():
            started = time.monotonic()
            status, body = healthz(self.probe)
            self.results.append((round(started, 3), status, body))
            self._stop.wait(0.1)

    def failures(self):
        return [r for r in self.results if r[1:] != (200, "ok")]

    def longest_failure_run(self):
        """The most probes in a row that failed: what a kubelet acts on (it restarts a container
        after failureThreshold, 3 by default, consecutive failures)."""
        longest = run = 0
        for r in self.results:
            run = run + 1 if r[1:] != (200, "ok") else 0
            longest = max(longest, run)
        return longest


def start_daemon(env):
    env.start()
    probe, debug = env.admin_addresses()
    wait_for(lambda: healthz(probe) == (200, "ok"), what="/healthz answering")
    return probe, debug


def test_idle_connections_on_the_debug_port_never_lock_out_the_probe(env):
    probe, debug = start_daemon(env)
    idle = []
    try:
        with Prober(probe) as prober:
            time.sleep(0.5)
            for _ in range(ATTACKERS + 8):
                idle.append(socket.create_connection(host_port(debug), timeout=5))
            time.sleep(3)
        assert len(prober.results) >= 20, prober.results
        assert prober.failures() == [], prober.failures()[:5]
        assert env.proc.poll() is None, "the daemon exited"
        # The debug listener itself still serves a newcomer: the idle connection waiting
        # longest gives way to it.
        conn = http.client.HTTPConnection(*host_port(debug), timeout=5)
        conn.request("GET", "/configz")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        for s in idle:
            s.close()
    assert env.stop() == 0


class Trickler:
    """ATTACKERS connections to `address`, each sent "\\r\\n" every second (never a request
    line); one the server closes is opened again at the next second, and trickles on."""

    def __init__(self, address):
        self.address = address
        self.socks = [None] * ATTACKERS
        self.closed_by_server = 0
        self.connects = 0

    def _closed(self, s):
        """Whether the server closed `s` (an answer, EOF or a reset is waiting)."""
        readable, _, _ = select.select([s], [], [], 0)
        if not readable:
            return False
        try:
            while s.recv(65536, socket.MSG_DONTWAIT):
                pass
        except BlockingIOError:
            pass  # an answer (a 408) read; the EOF follows
        except OSError:
            pass  # reset
        return True

    def tick(self):
        for i, s in enumerate(self.socks):
            if s is not None and self._closed(s):
                s.close()
                self.socks[i] = s = None
                self.closed_by_server += 1
            if s is None:
                try:
                    s = socket.create_connection(self.address, timeout=1)
                except OSError:
                    continue  # the backlog full for a moment: next second
                self.socks[i] = s
                self.connects += 1
            try:
                s.send(b"\r\n")
            except OSError:
                s.close()
                self.socks[i] = None
                self.closed_by_server += 1

    def close(self):
        for s in self.socks:
            if s is not None:
                s.close()


def test_line_end_tricklers_on_the_probe_port_never_lock_out_the_probe(env):
    probe, _ = start_daemon(env)
    trickler = Trickler(host_port(probe))
    try:
        with Prober(probe) as prober:
            # 12 s: past the 10 s head deadline, so that connections held from the start would
            # have to be closed by it even if nothing else closed them.
            deadline = time.monotonic() + 12
            while time.monotonic() < deadline:
                trickler.tick()
                time.sleep(1)
        assert len(prober.results) >= 60, prober.results
        # Every probe answered: each new connection takes the place of the trickle connection
        # waiting longest, and a probe's request, sent at once, is read long before 16 newer
        # connections could push it out.
        # Never locked out: a probe connection can lose the race against a reconnect storm on a
        # loaded machine (a connection closed before its request was read), but never twice in a
        # row, and the rest are answered. Before the fix every probe failed (119 of 119).
        assert prober.longest_failure_run() < 2, prober.failures()[:5]
        assert len(prober.failures()) <= len(prober.results) // 20, prober.failures()[:5]
        # The tricklers did hold the budget: more of them than it holds, closed and back again.
        assert trickler.closed_by_server >= ATTACKERS, (trickler.connects,
                                                        trickler.closed_by_server)
        assert env.proc.poll() is None, "the daemon exited"
    finally:
        trickler.close()
    assert env.stop() == 0
