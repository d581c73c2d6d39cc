"""A Spark standalone cluster (a master and workers) started from the pip-installed PySpark.

Every daemon is bound to 127.0.0.1 on free ports, runs in a process group of its own (its
executors and their Python workers are its children, so they share the group), and is
killed with that group on `stop()`. Work and log directories live under one temporary
directory. Workers run this interpreter as PYSPARK_PYTHON, so executors import the same
installed package.

    with StandaloneCluster(workers=2) as cluster:
        subprocess.run([sys.executable, job, cluster.master_url, ...])
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> str:
    """The pip-installed PySpark package directory: it holds bin/spark-class and jars/."""
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get_json(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def kill_group(process: subprocess.Popen, grace: float = 10.0):
    """SIGTERM the process group (a JVM stops its executors on it), then SIGKILL what is left."""
    try:
        pgid = os.getpgid(process.pid)
    except ProcessLookupError:
        process.poll()
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            process.poll()
            if process.returncode is not None and not _group_alive(pgid):
                return
            time.sleep(0.1)
    process.poll()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DaemonExited(RuntimeError):
    pass


class StandaloneCluster:
    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g",
                 daemon_memory: str = "256m", start_timeout: float = 90.0,
                 attempts: int = 3, parent: str = None):
        self.workers = workers
        # Where its directory goes (tempfile's default when None): a cluster started in a
        # background thread names it, since a test may redirect tempfile's default meanwhile.
        self.parent = parent
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.start_timeout = start_timeout
        self.attempts = attempts
        self.root = None
        self.processes = []  # (name, Popen, log path)
        self.master_url = None
        self.master_webui = None

    def environment(self) -> dict:
        home = spark_home()
        conf_dir = os.path.join(self.root, "conf")  # empty: no stray spark-defaults.conf
        os.makedirs(conf_dir, exist_ok=True)
        env = dict(os.environ)
        env.update({
            "SPARK_HOME": home,
            "SPARK_CONF_DIR": conf_dir,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": os.path.join(self.root, "logs"),
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            # A taken port ends the daemon (and start() tries new ports) rather than
            # moving it to a port nobody knows. No REST submission server: its fixed port
            # (6066) is taken when another cluster runs on the machine, and the master
            # then never answers its workers.
            "SPARK_DAEMON_JAVA_OPTS": "-Dspark.port.maxRetries=0 "
                                      "-Dspark.master.rest.enabled=false",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        })
        return env

    def _launch(self, name: str, args: list) -> subprocess.Popen:
        log_path = os.path.join(self.root, "logs", name + ".out")
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [os.path.join(spark_home(), "bin", "spark-class"), *args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=self.environment(), cwd=self.root, start_new_session=True)
        self.processes.append((name, process, log_path))
        return process

    def start(self):
        self.root = tempfile.mkdtemp(prefix="segmentlog-cluster-", dir=self.parent)
        os.makedirs(os.path.join(self.root, "logs"))
        try:
            for attempt in range(1, self.attempts + 1):
                try:
                    self._launch_all()
                    self._wait_for_workers()
                    return self
                except DaemonExited:
                    # Most likely a free port taken by someone else meanwhile: new ports.
                    if attempt == self.attempts:
                        raise
                    self._kill_all()
        except BaseException:
            self.stop()
            raise

    def _launch_all(self):
        port, webui = free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{port}"
        self.master_webui = f"http://127.0.0.1:{webui}"
        self._launch("master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port),
                                "--webui-port", str(webui)])
        for n in range(self.workers):
            work_dir = os.path.join(self.root, f"work-{n}")
            os.makedirs(work_dir, exist_ok=True)
            self._launch(f"worker-{n}", [
                WORKER_CLASS, self.master_url, "--host", "127.0.0.1",
                "--port", str(free_port()), "--webui-port", str(free_port()),
                "--cores", str(self.cores), "--memory", self.memory,
                "--work-dir", work_dir])

    def _wait_for_workers(self):
        deadline = time.monotonic() + self.start_timeout
        state = None
        while time.monotonic() < deadline:
            for name, process, _ in self.processes:
                if process.poll() is not None:
                    raise DaemonExited(f"{name} exited with {process.returncode}\n"
                                       + self.logs_tail())
            try:
                state = get_json(self.master_webui + "/json/")
            except OSError:
                state = None
            if state is not None and state.get("url") == self.master_url:  # ours, not a stranger's
                alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) >= self.workers:
                    return
            time.sleep(0.5)
        raise RuntimeError(f"{self.workers} workers did not register within "
                           f"{self.start_timeout:.0f}s (master state: {state})\n"
                           + self.logs_tail())

    def state(self) -> dict:
        return get_json(self.master_webui + "/json/")

    def logs_tail(self, lines: int = 30) -> str:
        parts = []
        for name, _, path in self.processes:
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    tail = handle.read().splitlines()[-lines:]
            except OSError:
                continue
            parts.append(f"--- {name} ({path}) ---\n" + "\n".join(tail))
        return "\n".join(parts)

    def _kill_all(self):
        # Workers first (each takes its executors down), then the master.
        for _, process, _ in reversed(self.processes):
            kill_group(process)
        self.processes = []

    def stop(self):
        self._kill_all()
        if self.root is not None and not os.environ.get("SEGMENTLOG_KEEP_CLUSTER_DIR"):
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False
