"""Run the production topology on one machine: nginx terminating TLS in front of two
application processes (waitress, deploy/cmsshop.ini) and the worker, on the database of
CMSSHOP_DATABASE_URL. The smoke suite (tests/deploy, ``make smoke``) runs it this way.

    export CMSSHOP_SECRET=... CMSSHOP_DATABASE_URL=postgresql+psycopg://...  # and the
    # CMSSHOP_MAIL_SMTP_*, CMSSHOP_CARDPROVIDER_*, CMSSHOP_SELLER_* production.ini names
    python deploy/run.py --listen 127.0.0.1:8443 --app-ports 6543,6544

    # the nginx side for a system nginx (/etc/nginx/conf.d/cmsshop.conf), nothing started:
    python deploy/run.py --nginx-conf --listen 443 --server-name shop.example.com \
        --certificate /etc/ssl/certs/shop.pem --certificate-key /etc/ssl/private/shop.key

Everything lives under one folder (``--folder``, else a new temporary one): nginx's
prefix (its rendered config, pid, temp files, error log), the access log
(``logs/access.log``, one JSON object a line), each process's output (``logs/*.log``)
and, unless ``--certificate``/``--certificate-key`` name real ones, a throw-away
self-signed certificate for ``--server-name`` and the listen address. The processes are
children of this one, each in a process group of its own, and die with it: Ctrl-C or
SIGTERM stops them all (nginx, the worker, then the application processes).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime as dt
import http.client
import ipaddress
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
INI = HERE / "cmsshop.ini"
TEMPLATES = HERE / "nginx"
PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")
START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def render(template: str, values: dict[str, object]) -> str:
    """``template`` with each ``{{name}}`` replaced; a name without a value is an error
    (a config with a hole in it must not reach nginx)."""

    def value(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"no value for {{{{{name}}}}} in the nginx template")
        return str(values[name])

    return PLACEHOLDER.sub(value, template)


def throwaway_certificate(folder: Path, server_name: str, host: str) -> tuple[Path, Path]:
    """A self-signed certificate (a day long) for ``server_name`` and ``host``, and its
    key, written to ``folder``: (certificate path, key path)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, server_name)])
    alternatives: list[x509.GeneralName] = [x509.DNSName(server_name)]
    with contextlib.suppress(ValueError):
        alternatives.append(x509.IPAddress(ipaddress.ip_address(host)))
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "certificate.pem", folder / "certificate.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started it dies, so a
    killed test run or script leaves nothing behind (Linux; elsewhere a no-op)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _tool(name: str) -> str:
    """An executable of this Python's environment (pserve, cmsshop-admin), else PATH's."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} is not installed (pip install -e . in the venv)")
    return found


class StartFailed(RuntimeError):
    """A process of the topology did not come up; the message ends with its log."""


class Topology:
    """nginx + two application processes + the worker, under ``folder``."""

    def __init__(
        self,
        folder: Path,
        env: dict[str, str],
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        app_ports: tuple[int, int] | None = None,
        server_name: str = "localhost",
        certificate: Path | None = None,
        certificate_key: Path | None = None,
        nginx: str = "nginx",
    ):
        self.folder = Path(folder)
        self.host, self.port = host, port or free_port(host)
        self.app_ports = list(app_ports or (free_port(), free_port()))
        self.server_name = server_name
        self.certificate, self.certificate_key = certificate, certificate_key
        # Debian puts it in /usr/sbin, which a user's PATH may not have.
        self.nginx = shutil.which(nginx) or shutil.which(nginx, path="/usr/sbin") or nginx
        self.env = {**os.environ, **env}
        self.logs = self.folder / "logs"
        self.prefix = self.folder / "nginx"
        self.access_log = self.logs / "access.log"
        self.processes: dict[str, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        """The public address: https through nginx."""
        return f"https://{self.host}:{self.port}"

    def app_url(self, index: int) -> str:
        """Application process ``index``'s own address (behind nginx's back)."""
        return f"http://127.0.0.1:{self.app_ports[index]}"

    # --- starting ---------------------------------------------------------------------

    def start(self) -> None:
        """Render the config, migrate the database, start everything and wait until
        nginx answers over TLS; stops what was started if anything fails."""
        try:
            self.prepare()
            self.run_admin("initdb")
            # Started together, waited for together: each takes seconds to import.
            waits = [self.start_app(i, wait=False) for i in range(len(self.app_ports))]
            waits.append(self.start_worker(wait=False))
            for wait in waits:
                wait()
            self.start_nginx()
        except BaseException:
            self.stop()
            raise

    def prepare(self) -> None:
        for folder in (self.folder, self.logs, self.prefix, self.prefix / "temp"):
            folder.mkdir(parents=True, exist_ok=True)
            # nginx's workers (nobody when the master is root) read the files under it.
            folder.chmod(0o755)
        if self.certificate is None or self.certificate_key is None:
            self.certificate, self.certificate_key = throwaway_certificate(
                self.prefix, self.server_name, self.host
            )
        for name in ("nginx.conf", "cmsshop.conf"):
            (self.prefix / name).write_text(self.nginx_config(name))

    def nginx_config(self, name: str = "cmsshop.conf") -> str:
        """deploy/nginx/``name``.template rendered for this topology."""
        storage = Path(self.env.get("CMSSHOP_STORAGE_DIR") or "/var/lib/cmsshop/files")
        values = {
            "prefix": self.prefix,
            "listen": f"{self.host}:{self.port}" if self.host else self.port,
            "server_name": self.server_name,
            "certificate": self.certificate,
            "certificate_key": self.certificate_key,
            "access_log": self.access_log,
            "storage_dir": storage.resolve(),
            "app_port_1": self.app_ports[0],
            "app_port_2": self.app_ports[1],
        }
        return render((TEMPLATES / f"{name}.template").read_text(), values)

    def run_admin(self, *argv: str) -> str:
        """``cmsshop-admin deploy/cmsshop.ini ARGV``; its output (StartFailed if it fails)."""
        done = subprocess.run(  # noqa: S603 - our own argv, no shell
            [_tool("cmsshop-admin"), str(INI), *argv],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode:
            raise StartFailed(f"cmsshop-admin {' '.join(argv)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
        try:
            process = subprocess.Popen(  # noqa: S603 - our own argv, no shell
                argv,
                env=self.env,
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stopped as a whole
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()
        self.processes[name] = process
        return process

    def start_app(self, index: int, wait: bool = True):
        """Start application process ``index`` and wait for its health check (or return
        the function that waits)."""
        name = f"app{index + 1}"
        port = self.app_ports[index]
        process = self._spawn(name, [_tool("pserve"), str(INI), f"http_port={port}"])
        return self._waiter(name, process, lambda: self._healthy(port), wait)

    def start_worker(self, wait: bool = True):
        process = self._spawn("worker", [_tool("cmsshop-admin"), str(INI), "worker"])
        return self._waiter("worker", process, lambda: self._said("worker", "worker: "), wait)

    def start_nginx(self) -> None:
        conf = str(self.prefix / "nginx.conf")
        test = subprocess.run(  # noqa: S603 - our own argv, no shell
            [self.nginx, "-t", "-p", str(self.prefix), "-c", conf],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if test.returncode:
            raise StartFailed(f"nginx -t refused the rendered config:\n{test.stderr}")
        argv = [self.nginx, "-p", str(self.prefix), "-c", conf, "-g", "daemon off;"]
        process = self._spawn("nginx", argv)
        self._waiter("nginx", process, self._tls_answers)

    def _waiter(self, name: str, process: subprocess.Popen, ready, wait: bool = True):
        def waiting() -> None:
            self._wait(name, process, ready)

        if wait:
            waiting()
        return waiting

    def _wait(self, name: str, process: subprocess.Popen, ready) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise StartFailed(f"{name} exited ({process.returncode}):\n{self.tail(name)}")
            if ready():
                return
            time.sleep(0.1)
        raise StartFailed(f"{name} was not ready in {START_TIMEOUT:.0f} s:\n{self.tail(name)}")

    def _healthy(self, port: int) -> bool:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            connection.request("GET", "/api/health")
            return connection.getresponse().status == 200
        except OSError:
            return False
        finally:
            connection.close()

    def _said(self, name: str, text: str) -> bool:
        return text in (self.logs / f"{name}.log").read_text(errors="replace")

    def _tls_answers(self) -> bool:
        context = ssl.create_default_context(cafile=str(self.certificate))
        try:
            with (
                socket.create_connection((self.host, self.port), timeout=2) as raw,
                context.wrap_socket(raw, server_hostname=self.server_name),
            ):
                return True
        except OSError:
            return False

    # --- stopping ---------------------------------------------------------------------

    def kill_app(self, index: int, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to application process ``index`` (SIGKILL: no goodbye)."""
        process = self.processes[f"app{index + 1}"]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        process.wait(timeout=STOP_TIMEOUT)

    def stop(self) -> None:
        """Stop every process started here: nginx, the worker, the application processes
        (SIGTERM to each one's process group, SIGKILL after STOP_TIMEOUT)."""
        first = [name for name in ("nginx", "worker") if name in self.processes]
        for name in first + [name for name in self.processes if name not in first]:
            process = self.processes.pop(name)
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=STOP_TIMEOUT)

    # --- what happened ----------------------------------------------------------------

    def tail(self, name: str, lines: int = 60) -> str:
        path = self.logs / f"{name}.log"
        if name == "nginx-errors":
            path = self.prefix / "error.log"
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def report(self, lines: int = 60) -> str:
        """The end of every log, for a failed test."""
        names = sorted(p.stem for p in self.logs.glob("*.log") if p.stem != "access")
        parts = [f"--- {name} ---\n{self.tail(name, lines)}" for name in names]
        parts.append(f"--- nginx error.log ---\n{self.tail('nginx-errors', lines)}")
        parts.append(f"--- access.log ---\n{self.tail('access', lines)}")
        return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, help="where everything lives (default: new)")
    parser.add_argument("--listen", default="127.0.0.1:8443", help="nginx's HOST:PORT")
    parser.add_argument("--app-ports", default="6543,6544", help="the two processes' ports")
    parser.add_argument("--server-name", default="localhost")
    parser.add_argument("--certificate", type=Path)
    parser.add_argument("--certificate-key", type=Path)
    parser.add_argument("--access-log", type=Path, help="with --nginx-conf")
    parser.add_argument(
        "--nginx-conf",
        action="store_true",
        help="print cmsshop.conf for a system nginx (with --certificate, --certificate-key,"
        " --access-log; storage from CMSSHOP_STORAGE_DIR) and exit",
    )
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    first, second = (int(p) for p in args.app_ports.split(","))
    folder = args.folder or Path(tempfile.gettempdir(), "cmsshop-topology")
    if not args.folder and not args.nginx_conf:
        folder = Path(tempfile.mkdtemp(prefix="cmsshop-topology-"))
    topology = Topology(
        folder,
        {},
        host=host,
        port=int(port),
        app_ports=(first, second),
        server_name=args.server_name,
        certificate=args.certificate,
        certificate_key=args.certificate_key,
    )
    if args.nginx_conf:
        if not (args.certificate and args.certificate_key):
            parser.error("--nginx-conf needs --certificate and --certificate-key")
        topology.access_log = args.access_log or Path("/var/log/nginx/cmsshop.log")
        print(topology.nginx_config(), end="")
        return 0
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    try:
        topology.start()
        print(f"serving {topology.url} (logs in {topology.logs}); Ctrl-C stops", flush=True)
        while not stopping:
            for name, process in topology.processes.items():
                if process.poll() is not None:
                    print(f"{name} exited ({process.returncode}):\n{topology.tail(name)}")
                    return 1
            time.sleep(0.5)
    except StartFailed as exc:
        print(exc, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        topology.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
