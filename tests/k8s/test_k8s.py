#!/usr/bin/env python3
"""deploy/k8s/: the manifests, checked without a cluster.

    python3 tests/k8s/test_k8s.py [Class.test_method ...]

Manifests     every object of every manifest, filled in by deploy/k8s/run.sh
              --render with sample values, read into the Kubernetes Python
              client's model of its kind (V1Deployment, V1Service, V1Job);
              written back from the model it is exactly the input (the models
              drop fields they do not know: a misspelled field fails), and the
              invariants a benchmark needs hold (below).
RunFake       run.sh against a stand-in kubectl (fake_kubectl.py) and merge:
              what it applies, the order, each agent's log in its file, the
              merge's arguments, the clean-up after success, failure (the
              failed index named), a failed merge, an interrupt, and with
              --keep-server.
KubePlay      the server manifest under `podman kube play` with the server
              image built from this tree: GET /plaintext answers, the pod runs
              as 10001 with the manifest's limits, it stops cleanly, and
              `podman kube down` leaves nothing (test_play_get_down); and the
              Job's pod template played as one Pod per completion index with
              the bench image against it, the agents' outputs merged by
              bench/compare/merge (test_agents_merged).

Exit 0 all passed, 1 a failure, 77 all skipped (KubePlay: no Podman that can
run, or no server or bench image: docker/build.sh --image all builds them).
"""

from __future__ import annotations

import copy
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
RUN = K8S / "run.sh"
sys.path.insert(0, str(REPO / "bench" / "compare"))
from smcompare.hosting import IMAGE, Engine, limits_options  # noqa: E402
from smcompare.procs import free_port  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "containers"))
from test_containers import BENCH_IMAGE, run_tests  # noqa: E402  (0, 1, or 77 when all were skipped)

import yaml  # noqa: E402  (python3-yaml)

LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/component", "app.kubernetes.io/part-of")
# run.sh --render's sample values, and what they make of them.
SAMPLE = ["--agents", "3", "--connections", "96", "--rate", "30000", "--duration", "20s", "--warmup", "2s",
          "--agent-threads", "2", "--server-threads", "4", "--path", "/json", "--lead", "30"]
# KubePlay.test_agents_merged: START_AT this many seconds after rendering,
# for playing both agent pods and starting loadgen in them (0.4 s on an idle
# machine; generous, so that a busy one never makes an agent late: a late
# agent fails the merge).
AGENT_LEAD = 20


def render(*args: str) -> tuple[Path, subprocess.CompletedProcess]:
    out = Path(tempfile.mkdtemp(prefix="sm-k8s-"))
    r = subprocess.run([str(RUN), "--render", str(out), *args], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    return out, r


def load_all(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def model_class(obj: dict) -> str:
    """The client's model of obj's kind: apps/v1 Deployment -> V1Deployment."""
    version = obj.get("apiVersion", "").rpartition("/")[2]
    return version[:1].upper() + version[1:] + obj.get("kind", "")


def diff(a, b, where: str = "") -> list[str]:
    """Where b differs from a (a: the manifest; b: it back from the model)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}.{k}: not a field of the model (misspelled?), dropped" for k in a if k not in b]
        out += [f"{where}.{k}: added by the model" for k in b if k not in a]
        for k in a.keys() & b.keys():
            out += diff(a[k], b[k], f"{where}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{where}[{i}]")]
    if a != b or type(a) is not type(b):
        return [f"{where}: {a!r} came back as {b!r}"]
    return []


class Manifests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        import kubernetes.client  # python3-kubernetes (scripts/deps.sh, group test)
        cls.client = kubernetes.client
        cls.api = kubernetes.client.ApiClient()
        cls.out, r = render(*SAMPLE)
        if r.returncode != 0:
            raise AssertionError(f"run.sh --render failed ({r.returncode}): {r.stderr}")
        cls.start_at = re.search(r"START_AT (\S+)\)", r.stdout).group(1)
        cls.docs = {p.name: load_all(p) for p in sorted(cls.out.glob("*.yaml"))}

    def model(self, obj: dict):
        """obj as its kind's model, through the client's public deserialize()."""
        name = model_class(obj)
        self.assertTrue(hasattr(self.client, name), f"{obj.get('kind')} ({obj.get('apiVersion')}): "
                                                    f"no model {name} in the Kubernetes client")

        class Response:  # deserialize() reads a response's .data
            data = json.dumps(obj)

        m = self.api.deserialize(Response(), name)
        self.assertEqual(type(m).__name__, name)
        return m

    def roundtrip(self, obj: dict) -> list[str]:
        return diff(obj, self.api.sanitize_for_serialization(self.model(obj)), obj.get("kind", "?"))

    def objects(self, kind: str) -> list[dict]:
        return [o for docs in self.docs.values() for o in docs if o.get("kind") == kind]

    def one(self, kind: str) -> dict:
        found = self.objects(kind)
        self.assertEqual(len(found), 1, f"expected one {kind} in deploy/k8s/")
        return found[0]

    def test_every_object_is_its_model(self) -> None:
        """Every manifest in deploy/k8s/ (run.sh renders them all), every
        object: its kind's model, and back exactly."""
        templates = sorted(p.name for p in K8S.glob("*.yaml"))
        self.assertEqual(sorted(self.docs), templates, "run.sh --render renders every manifest of deploy/k8s/")
        kinds = []
        for name, docs in self.docs.items():
            text = (self.out / name).read_text()
            self.assertIsNone(re.search(r"\$\{[A-Za-z_]\w*\}", text), f"{name}: a placeholder is left")
            for obj in docs:
                with self.subTest(manifest=name, kind=obj.get("kind")):
                    self.assertEqual(self.roundtrip(obj), [])
                    kinds.append(obj["kind"])
        self.assertEqual(sorted(kinds), ["Deployment", "Job", "Service"])

    def test_misspelled_field_fails(self) -> None:
        """The round trip catches what the models drop: a misspelled field at
        the top of a spec and deep in a container, and a quantity given as a
        number (the models hold quantities as strings)."""
        job = self.one("Job")
        bad = copy.deepcopy(job)
        bad["spec"]["completionMod"] = bad["spec"].pop("completionMode")
        self.assertIn("Job.spec.completionMod: not a field of the model (misspelled?), dropped",
                      self.roundtrip(bad))
        bad = copy.deepcopy(self.one("Deployment"))
        c = bad["spec"]["template"]["spec"]["containers"][0]
        c["readinesProbe"] = c.pop("readinessProbe")
        self.assertTrue(any("readinesProbe" in d for d in self.roundtrip(bad)), self.roundtrip(bad))
        bad = copy.deepcopy(job)
        bad["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = 2
        self.assertTrue(any("limits.cpu: 2 came back as '2'" in d for d in self.roundtrip(bad)), self.roundtrip(bad))

    def pod_specs(self) -> list[tuple[str, dict]]:
        return [(o["kind"], o["spec"]["template"]) for o in self.objects("Deployment") + self.objects("Job")]

    def test_guaranteed_whole_cores(self) -> None:
        """Each container of each pod: CPU and memory requested == limited,
        CPU in whole cores (Guaranteed QoS; the static CPU manager policy
        gives such a container cores of its own)."""
        for kind, tmpl in self.pod_specs():
            for c in tmpl["spec"].get("initContainers", []) + tmpl["spec"]["containers"]:
                with self.subTest(kind=kind, container=c["name"]):
                    res = c.get("resources", {})
                    self.assertEqual(sorted(res.get("limits", {})), ["cpu", "memory"])
                    self.assertEqual(res.get("requests"), res.get("limits"), "requests == limits")
                    self.assertRegex(res["limits"]["cpu"], r"^[1-9][0-9]*$", "whole cores")

    def test_non_root(self) -> None:
        for kind, tmpl in self.pod_specs():
            with self.subTest(kind=kind):
                sc = tmpl["spec"].get("securityContext", {})
                self.assertIs(sc.get("runAsNonRoot"), True)
                self.assertEqual(sc.get("runAsUser"), 10001, "the server image's user")
                for c in tmpl["spec"]["containers"]:
                    self.assertIs(c["securityContext"]["allowPrivilegeEscalation"], False)

    def test_labels(self) -> None:
        """The app.kubernetes.io labels on every object and pod template."""
        labelled = [(o["kind"], o["metadata"].get("labels", {})) for docs in self.docs.values() for o in docs]
        labelled += [(f"{kind} pod template", t["metadata"].get("labels", {})) for kind, t in self.pod_specs()]
        for what, labels in labelled:
            with self.subTest(what=what):
                for key in LABELS:
                    self.assertIn(key, labels)
                self.assertEqual(labels["app.kubernetes.io/name"], "servermodels")
                self.assertEqual(labels["app.kubernetes.io/part-of"], "servermodels")
                self.assertEqual(labels["app.kubernetes.io/component"],
                                 "loadgen" if what.startswith("Job") else "server")

    def test_server(self) -> None:
        """One replica of the image's server-epoll on 0.0.0.0:8080 with the
        threads asked for, ready when /plaintext answers; the Service selects
        exactly the server's pods (not the load's) and reaches its port."""
        dep, svc, job = self.one("Deployment"), self.one("Service"), self.one("Job")
        self.assertEqual(dep["spec"]["replicas"], 1)
        tmpl = dep["spec"]["template"]
        labels = tmpl["metadata"]["labels"]
        self.assertLessEqual(dep["spec"]["selector"]["matchLabels"].items(), labels.items())
        [c] = tmpl["spec"]["containers"]
        self.assertEqual(c["image"], IMAGE)
        self.assertEqual(c["command"], ["server-epoll"])
        self.assertEqual(c["args"], ["--address", "0.0.0.0", "--port", "8080", "--threads", "4"])
        self.assertEqual(c["resources"]["limits"]["cpu"], "4", "--server-cpus: --server-threads by default")
        [port] = c["ports"]
        self.assertEqual(port["containerPort"], 8080)
        probe = c["readinessProbe"]["httpGet"]
        self.assertEqual(probe["path"], "/plaintext")
        self.assertIn(probe["port"], (8080, port["name"]))

        self.assertEqual(svc["metadata"]["name"], dep["metadata"]["name"])
        self.assertEqual(svc["spec"].get("type", "ClusterIP"), "ClusterIP")
        sel = svc["spec"]["selector"]
        self.assertLessEqual(sel.items(), labels.items(), "the Service selects the server's pods")
        self.assertFalse(sel.items() <= job["spec"]["template"]["metadata"]["labels"].items(),
                         "the Service selects the load's pods too")
        [sport] = svc["spec"]["ports"]
        self.assertEqual(sport["port"], 8080)
        self.assertIn(sport["targetPort"], (8080, port["name"]))

    def test_job(self) -> None:
        """An Indexed Job, one pod per agent, all at once, none retried; each
        agent's share of the connections and rate, the common start instant,
        JSON and the interval log on stdout, against the Service."""
        job, svc = self.one("Job"), self.one("Service")
        spec = job["spec"]
        self.assertEqual(spec["completionMode"], "Indexed")
        self.assertEqual(spec["completions"], 3)
        self.assertEqual(spec["parallelism"], spec["completions"])
        self.assertEqual(spec["backoffLimit"], 0)
        self.assertGreater(spec["activeDeadlineSeconds"], 30 + 2 + 20, "past the lead, warm-up and duration")
        pod = spec["template"]["spec"]
        self.assertEqual(pod["restartPolicy"], "Never")
        [c] = pod["containers"]
        self.assertEqual(c["image"], BENCH_IMAGE)
        self.assertEqual(c["command"], ["loadgen"])
        args = c["args"]

        def arg(flag: str) -> str:
            self.assertIn(flag, args)
            return args[args.index(flag) + 1]

        self.assertEqual(arg("-c"), "32", "96 connections over 3 agents")
        self.assertEqual(arg("--rate"), "10000", "30000 requests/s over 3 agents")
        self.assertEqual(arg("-t"), "2")
        self.assertEqual(arg("-d"), "20s")
        self.assertEqual(arg("--warmup"), "2s")
        self.assertEqual(arg("--start-at"), self.start_at)
        self.assertRegex(self.start_at, r"^[0-9]{10}\.[0-9]{3}$", "epoch seconds with a fraction")
        self.assertAlmostEqual(float(self.start_at), time.time() + 30, delta=25)
        self.assertEqual(arg("--json"), "-")
        self.assertEqual(arg("--hlog"), "-")
        self.assertIn("-q", args)
        url = f"http://{svc['metadata']['name']}:{svc['spec']['ports'][0]['port']}/json"
        self.assertEqual(args[-1], url)
        self.assertEqual(c["resources"]["limits"]["cpu"], "2", "--agent-cpus: --agent-threads by default")

    def test_render_refuses(self) -> None:
        """Uneven shares, fractional cores and unknown options are refused
        before anything is written; --help works."""
        for args, text in ((["--agents", "3", "--connections", "100"], "multiple of 3"),
                           (["--server-cpus", "1.5"], "whole number"),
                           (["--rate", "fast"], "--rate"),
                           (["--duration", "10x"], "--duration"),
                           (["--bogus"], "unknown argument '--bogus'")):
            with self.subTest(args=args):
                out, r = render(*args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(text, r.stderr)
                self.assertEqual(list(out.iterdir()), [])
                out.rmdir()
        r = subprocess.run([str(RUN), "--help"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0)
        self.assertIn("--agents N", r.stdout)

    def test_no_cluster(self) -> None:
        """Without a cluster (the real kubectl, pointed at a port where
        nothing listens) run.sh says so and makes nothing."""
        with tempfile.TemporaryDirectory(prefix="sm-k8s-") as home:
            config = Path(home) / "kubeconfig"
            config.write_text(json.dumps({
                "apiVersion": "v1", "kind": "Config", "current-context": "nowhere",
                "clusters": [{"name": "nowhere", "cluster": {"server": "https://127.0.0.1:1"}}],
                "contexts": [{"name": "nowhere", "context": {"cluster": "nowhere", "user": "nobody"}}],
                "users": [{"name": "nobody", "user": {}}]}))
            env = {**os.environ, "KUBECONFIG": str(config), "HOME": home}
            r = subprocess.run([str(RUN), "--out", str(Path(home) / "out")], capture_output=True, text=True,
                               timeout=60, env=env, stdin=subprocess.DEVNULL)
            if r.returncode == 1 and "kubectl not found" in r.stderr:
                self.skipTest("no kubectl here")
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("no Kubernetes cluster reachable (context 'nowhere')", r.stderr)
            print(r.stderr.strip())
            self.assertFalse((Path(home) / "out").exists())

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.out, True)


class RunFake(unittest.TestCase):
    """run.sh's cluster path, with kubectl and the merge replaced by stand-ins
    that answer as a cluster and bench/compare/merge would and record what
    they were asked (the real ones: see deploy/k8s/README.md)."""

    def setUp(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="sm-k8s-fake-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        bin_dir = self.tmp / "bin"
        bin_dir.mkdir()
        (bin_dir / "kubectl").write_text(f"#!/bin/sh\nexec {sys.executable} {Path(__file__).parent / 'fake_kubectl.py'}"
                                         ' "$@"\n')
        (bin_dir / "kubectl").chmod(0o755)
        merge = self.tmp / "merge"
        merge.write_text('#!/bin/sh\necho "$@" >"$FAKE_KUBECTL_DIR/merge.args"\necho "merged: fake"\n'
                         'exit "${FAKE_MERGE_RC:-0}"\n')
        merge.chmod(0o755)
        self.calls_dir = self.tmp / "calls"
        self.calls_dir.mkdir()
        self.out = self.tmp / "out"
        self.env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SM_K8S_MERGE": str(merge),
                    "FAKE_KUBECTL_DIR": str(self.calls_dir), "FAKE_KUBECTL_AGENTS": "3"}

    def run_sh(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(RUN), "--out", str(self.out), "--lead", "1", *args], capture_output=True,
                              text=True, timeout=120, env={**self.env, **env}, stdin=subprocess.DEVNULL)

    def calls(self) -> list[list[str]]:
        return [json.loads(line) for line in (self.calls_dir / "calls.jsonl").read_text().splitlines()]

    def verbs(self) -> list[str]:
        """Each call's first two words, --namespace NS aside."""
        return [" ".join((c[2:] if c[:1] == ["--namespace"] else c)[:2]) for c in self.calls()]

    def test_complete(self) -> None:
        r = self.run_sh("--agents", "3", "--connections", "30", "--namespace", "bench")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("merged: fake", r.stdout)
        applied = sorted(p.name for p in self.calls_dir.glob("applied-*"))
        self.assertEqual(applied, ["applied-0-server.yaml", "applied-1-loadgen-job.yaml"], "server first")
        for name in ("server.yaml", "loadgen-job.yaml"):
            self.assertEqual((self.out / name).read_text(), next(self.calls_dir.glob(f"applied-*-{name}")).read_text(),
                             f"OUT/{name} is what was applied")
        job = load_all(self.out / "loadgen-job.yaml")[0]
        self.assertEqual(job["spec"]["completions"], 3)
        for i in range(3):
            self.assertEqual((self.out / f"agent-{i}.out").read_text(), f"fake output of agent {i}\n")
        self.assertEqual((self.calls_dir / "merge.args").read_text().split(),
                         ["-o", str(self.out), *(str(self.out / f"agent-{i}.out") for i in range(3))])
        self.assertTrue(all(c[:2] == ["--namespace", "bench"] for c in self.calls()
                            if c[0] not in ("config", "get") or c[1] not in ("current-context", "--raw", "namespace")),
                        self.calls())
        verbs = self.verbs()
        self.assertEqual(verbs[-2:], ["delete job", "delete -f"], "the Job, then the server deleted")
        self.assertIn("logs servermodels-loadgen-fake-2-abcde", verbs)

    def test_recorded_pods_merged(self) -> None:
        """The real bench/compare/merge on recorded loadgen outputs as the pods' logs (two loadgens of one
        --start-at, tests/compare/data/agents): the totals are the agents' sums, the merged log is written."""
        recorded = REPO / "tests" / "compare" / "data" / "agents"
        env = {k: v for k, v in self.env.items() if k != "SM_K8S_MERGE"}
        r = subprocess.run([str(RUN), "--out", str(self.out), "--lead", "1", "--agents", "2", "--connections", "4"],
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                           env={**env, "FAKE_KUBECTL_AGENTS": "2", "FAKE_KUBECTL_LOGS": str(recorded)})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        docs = [json.JSONDecoder().raw_decode((recorded / f"agent-{i}.out").read_text())[0] for i in (0, 1)]
        merged = json.loads((self.out / "merged.json").read_text())
        self.assertEqual(merged["requests"], sum(d["requests"] for d in docs))
        self.assertEqual(merged["latency"]["count"], merged["requests"])
        self.assertEqual([a["name"] for a in merged["agents"]], ["agent-0", "agent-1"])
        self.assertIn("Tag=" if merged["latency_uncorrected"] else "HISTF", (self.out / "merged.hlog").read_text())
        self.assertIn(f"2 agents, {merged['requests']} requests", r.stdout)

    def test_failed_agent(self) -> None:
        r = self.run_sh("--agents", "3", "--connections", "30", FAKE_KUBECTL_FAIL="1")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("the job failed: Job has reached the specified backoff limit", r.stderr)
        self.assertIn("failed agent(s), by index: 1 (servermodels-loadgen-fake-1-abcde, Failed)", r.stderr)
        self.assertFalse((self.calls_dir / "merge.args").exists(), "no merge after a failure")
        self.assertTrue((self.out / "agent-1.out").exists(), "the failed agent's output kept")
        self.assertEqual(self.verbs()[-2:], ["delete job", "delete -f"])

    def test_merge_fails(self) -> None:
        """The merge's exit code (an agent it refuses), said, and the clean-up."""
        r = self.run_sh(FAKE_MERGE_RC="1")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("the merge failed (exit 1, above)", r.stderr)
        self.assertEqual(self.verbs()[-2:], ["delete job", "delete -f"])

    def test_interrupted(self) -> None:
        """SIGTERM while the Job runs: exit 143, the Job and the server deleted."""
        p = subprocess.Popen([str(RUN), "--out", str(self.out), "--lead", "1"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**self.env, "FAKE_KUBECTL_RUNNING": "1"},
                             stdin=subprocess.DEVNULL)
        try:
            for line in p.stdout:
                if "waiting for job/" in line:
                    break
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=60)
        finally:
            p.kill()
            p.wait()
        self.assertEqual(p.returncode, 143, out + err)
        self.assertEqual(self.verbs()[-2:], ["delete job", "delete -f"])

    def test_keep_server(self) -> None:
        r = self.run_sh("--keep-server")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("the server is kept", r.stdout)
        self.assertEqual([v for v in self.verbs() if v.startswith("delete")], ["delete job"])

    def test_no_cluster(self) -> None:
        r = self.run_sh(FAKE_KUBECTL_DOWN="1")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("no Kubernetes cluster reachable (context 'fake'): The connection to the server", r.stderr)
        self.assertFalse(self.out.exists())
        self.assertFalse(any(v.startswith(("apply", "delete")) for v in self.verbs()))


class KubePlay(unittest.TestCase):
    """deploy/k8s/server.yaml (and, in test_agents_merged, the loadgen Job's
    pod template: see there) under `podman kube play`, with these changes,
    all forced by Podman 4.3 or this sandbox, none to what runs:
      - --network host (no bridge network can be made here), so the server
        gets a free port instead of 8080 (--port), and the container has no
        `ports` (Podman 4.3 publishes every containerPort, which host
        networking refuses: "PortMappings can only be used with Bridge");
      - the Deployment's name (and the agent pods') starts with sm-test-
        (no clash with a concurrent run; containers:cleanup knows the prefix);
      - the containers' open-file and process limits of tests/containers
        (limits_options(): Podman's defaults are above what this sandbox may
        set), through a containers.conf of the test's own (CONTAINERS_CONF,
        which stands in for the system's containers.conf files for these
        commands: kube play has no --ulimit).
    The readiness probe's port follows the server's (Podman ignores it).
    Podman 4.3 plays the Deployment as a Pod named NAME-pod-0, ignores the
    Service ("Kube kind Service not supported", logged at level info) and
    the readiness probe (only liveness probes become health checks)."""

    def setUp(self) -> None:
        self.engine = Engine(Engine.pick(os.environ.get("SM_ENGINE")), os.environ.get("SM_IMAGE", IMAGE), [])
        if self.engine.name != "podman":
            self.skipTest("podman kube play needs Podman (SM_ENGINE is docker)")
        why = self.engine.unusable()
        if why:
            self.skipTest(why)
        self.exe = self.engine.exe
        self.tmp = Path(tempfile.mkdtemp(prefix="sm-test-k8s-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        limits = dict(o.split("=", 1) for o in limits_options()[1::2])
        conf = self.tmp / "containers.conf"
        conf.write_text("[containers]\ndefault_ulimits = [%s]\n"
                        % ", ".join(f'"{k}={v}"' for k, v in limits.items()))
        self.env = {**os.environ, "CONTAINERS_CONF": str(conf)}
        self.name = f"sm-test-k8s-{uuid.uuid4().hex[:8]}"

    def podman(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([self.exe, *args], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=self.env)

    def play(self, manifest: Path, *pods: str) -> subprocess.CompletedProcess:
        """`podman kube play --network host MANIFEST`, taken down (and its pods removed) at clean-up."""
        def down() -> None:
            self.podman("kube", "down", str(manifest))
            for pod in pods:
                self.podman("pod", "rm", "-f", "-t", "0", pod)

        self.addCleanup(down)
        play = self.podman("--log-level", "info", "kube", "play", "--network", "host", str(manifest), timeout=180)
        if "catatonit" in play.stderr:
            self.fail("podman kube play needs catatonit for the pod's infra container "
                      f"(scripts/deps.sh --only containers installs it): {play.stderr.strip().splitlines()[-1]}")
        self.assertEqual(play.returncode, 0, play.stdout + play.stderr)
        return play

    def play_server(self) -> tuple[Path, int, str, str]:
        """server.yaml (--server-threads 2), changed as the class says, played:
        (the manifest played, the server's port, its pod, its container)."""
        out, r = render("--server-threads", "2")
        self.addCleanup(shutil.rmtree, out, True)
        self.assertEqual(r.returncode, 0, r.stderr)
        docs = load_all(out / "server.yaml")
        [dep] = [d for d in docs if d["kind"] == "Deployment"]
        port = free_port()
        dep["metadata"]["name"] = self.name
        [c] = dep["spec"]["template"]["spec"]["containers"]
        c.pop("ports")
        c["readinessProbe"]["httpGet"]["port"] = port
        self.assertEqual(c["args"][2:4], ["--port", "8080"])
        c["args"][3] = str(port)
        c["image"] = self.engine.image
        manifest = self.tmp / "server.yaml"
        manifest.write_text(yaml.safe_dump_all(docs))
        pod, ctr = f"{self.name}-pod-0", f"{self.name}-pod-0-server"
        play = self.play(manifest, pod)
        service = ("skipped (Kube kind Service not supported)" if "Kube kind Service not supported" in play.stderr
                   else "accepted")
        print(f"podman kube play: pod {pod}; the Service {service}")
        return manifest, port, pod, ctr

    def get(self, port: int, ctr: str) -> tuple[int, bytes]:
        """GET /plaintext on 127.0.0.1:port, tried for 30 s while nothing answers."""
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", "/plaintext")
                resp = conn.getresponse()
                status, body = resp.status, resp.read()
                conn.close()
                break
            except OSError as e:
                if time.monotonic() > deadline:
                    logs = self.podman("logs", ctr)
                    self.fail(f"nothing answers on :{port} 30 s after kube play ({e}): {logs.stdout}{logs.stderr}")
                time.sleep(0.2)
        return status, body

    def test_play_get_down(self) -> None:
        manifest, port, pod, ctr = self.play_server()
        name = self.name
        self.assertEqual(self.get(port, ctr), (200, b"Hello, World!"))
        self.assertIn(f"listening on http://0.0.0.0:{port} model=epoll threads=2", self.podman("logs", ctr).stdout)

        info = json.loads(self.podman("inspect", ctr).stdout)[0]
        self.assertEqual(info["Config"]["User"], "10001:10001")
        self.assertEqual(info["HostConfig"]["NanoCpus"], 2_000_000_000, "limits.cpu 2")
        self.assertEqual(info["HostConfig"]["Memory"], 256 * 1024 * 1024, "limits.memory 256Mi")
        self.assertIs(info["HostConfig"]["ReadonlyRootfs"], True)
        self.assertEqual(info["EffectiveCaps"] or [], [], "capabilities: drop ALL")
        status_file = Path(f"/proc/{info['State']['Pid']}/status").read_text()
        self.assertRegex(status_file, r"\nUid:\s+10001\s")
        labels = json.loads(self.podman("pod", "inspect", pod).stdout).get("Labels") or {}
        self.assertEqual(labels.get("app.kubernetes.io/component"), "server")

        infra = json.loads(self.podman("pod", "inspect", pod).stdout).get("InfraContainerID", "")
        self.assertTrue(infra, "the pod's infra container")
        stop = self.podman("pod", "stop", "-t", "30", pod)
        self.assertEqual(stop.returncode, 0, stop.stderr)
        self.assertEqual(self.podman("inspect", "--format", "{{.State.ExitCode}}", ctr).stdout.strip(), "0",
                         "the server ends by itself on SIGTERM")
        d = self.podman("kube", "down", str(manifest))
        self.assertEqual(d.returncode, 0, d.stderr)
        self.assertNotEqual(self.podman("pod", "exists", pod).returncode, 0, "pod left after kube down")
        left = [n for n in self.podman("ps", "-a", "--format", "{{.Names}}").stdout.split() if name in n]
        self.assertEqual(left, [], "containers left after kube down")
        self.assertNotEqual(self.podman("container", "exists", infra).returncode, 0, "infra container left")
        with self.assertRaises(OSError):
            http.client.HTTPConnection("127.0.0.1", port, timeout=2).connect()

    def test_agents_merged(self) -> None:
        """The load side too: the Job of loadgen-job.yaml (2 agents, 2
        connections each, --warmup 500ms, -d 2s, START_AT AGENT_LEAD s ahead)
        played as one Pod per completion index against the played server,
        their logs merged by the real bench/compare/merge, then everything
        taken down. Podman 4.3's kube play does not play Jobs ("Kube kind Job
        not supported", checked below), so each completion index becomes a
        Pod with the Job's pod template as it is (restartPolicy Never, the
        same container), named NAME-loadgen-INDEX, with what the Job
        controller adds to an Indexed Job's pod (the completion-index
        annotation, JOB_COMPLETION_INDEX). There is no Service and no cluster
        DNS under podman: the URL's host servermodels-server:8080 becomes
        127.0.0.1:PORT, the played server's (host networking)."""
        bench = os.environ.get("SM_BENCH_IMAGE", BENCH_IMAGE)
        if self.podman("image", "inspect", bench).returncode != 0:
            self.skipTest(f"image {bench} not found in podman; build it: docker/build.sh --image bench")
        helps = self.podman("run", "--rm", "--pull=never", "--network", "host", bench, "loadgen", "--help")
        for flag in ("--start-at", "--hlog"):
            self.assertIn(flag, helps.stdout + helps.stderr,
                          f"{bench}'s loadgen has no {flag}: the image is older than bench/loadgen; "
                          "rebuild it: docker/build.sh --image bench")

        server_manifest, port, server_pod, server_ctr = self.play_server()
        self.assertEqual(self.get(port, server_ctr), (200, b"Hello, World!"))

        # START_AT is now + --lead when rendered: rendered only now, the server up.
        out, r = render("--agents", "2", "--connections", "4", "--duration", "2s", "--warmup", "500ms",
                        "--lead", str(AGENT_LEAD), "--bench-image", bench)
        self.addCleanup(shutil.rmtree, out, True)
        self.assertEqual(r.returncode, 0, r.stderr)
        start_at = re.search(r"START_AT (\S+)\)", r.stdout).group(1)
        [job] = load_all(out / "loadgen-job.yaml")
        self.assertEqual((job["kind"], job["spec"]["completionMode"], job["spec"]["completions"]),
                         ("Job", "Indexed", 2))
        refused = self.podman("--log-level", "info", "kube", "play", "--network", "host",
                              str(out / "loadgen-job.yaml"))
        self.assertNotEqual(refused.returncode, 0, "podman kube play played the Job: play it as it is")
        self.assertIn("Kube kind Job not supported", refused.stderr)
        pods, ctrs = [], []
        for index in range(job["spec"]["completions"]):
            tmpl = copy.deepcopy(job["spec"]["template"])
            pod = f"{self.name}-loadgen-{index}"
            meta = tmpl["metadata"]
            meta["name"] = pod
            meta.setdefault("annotations", {})["batch.kubernetes.io/job-completion-index"] = str(index)
            [c] = tmpl["spec"]["containers"]
            self.assertEqual(c["image"], bench)
            args = c["args"]
            self.assertEqual(args[args.index("--start-at") + 1], start_at)
            self.assertEqual(args[-1], "http://servermodels-server:8080/plaintext")
            args[-1] = f"http://127.0.0.1:{port}/plaintext"
            c.setdefault("env", []).append({"name": "JOB_COMPLETION_INDEX", "value": str(index)})
            pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tmpl["spec"]})
            ctrs.append(f"{pod}-{c['name']}")
        manifest = self.tmp / "agents.yaml"
        manifest.write_text(yaml.safe_dump_all(pods))
        names = [p["metadata"]["name"] for p in pods]
        self.play(manifest, *names)
        print(f"podman kube play: pods {', '.join(names)}; START_AT {start_at}, "
              f"{float(start_at) - time.time():.1f} s ahead after kube play")

        # Bounded, generously: the lead, the warm-up, the measured time and loadgen's own timeouts.
        deadline = time.monotonic() + AGENT_LEAD + 0.5 + 2 + 180
        while True:
            states = [self.podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", c).stdout.split()
                      for c in ctrs]
            if all(s[:1] == ["exited"] for s in states):
                break
            if time.monotonic() > deadline:
                self.fail(f"the agents did not exit: {dict(zip(ctrs, states))}")
            time.sleep(0.5)
        results = self.tmp / "results"
        results.mkdir()
        docs = []
        for index, (ctr, state) in enumerate(zip(ctrs, states)):
            # podman logs (k8s-file, Podman 4.3) gives the container's stderr
            # on its own stderr: its stdout is loadgen's stdout alone.
            logs = self.podman("logs", ctr)
            self.assertEqual(logs.returncode, 0, logs.stderr)
            self.assertEqual(state, ["exited", "0"], f"agent {index}: {logs.stderr}")
            self.assertEqual(logs.stderr, "", f"agent {index}: loadgen -q wrote to stderr")
            (results / f"agent-{index}.out").write_text(logs.stdout)
            docs.append(json.JSONDecoder().raw_decode(logs.stdout)[0])
        merge = subprocess.run([str(REPO / "bench" / "compare" / "merge"), "-o", str(results),
                                *(str(results / f"agent-{i}.out") for i in range(len(ctrs)))],
                               capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        print(merge.stdout.strip())
        self.assertEqual(merge.returncode, 0, merge.stdout + merge.stderr)
        merged = json.loads((results / "merged.json").read_text())
        self.assertEqual(merged["requests"], sum(d["requests"] for d in docs))
        self.assertGreater(merged["requests"], 0)
        for d in docs:  # (seconds as a double: equal to the microsecond the manifest gives)
            self.assertAlmostEqual(d["start_at"]["requested_s"], float(start_at), delta=1e-6,
                                   msg="both agents were given the start instant of the manifest")
        self.assertEqual([d["config"]["connections"] for d in docs], [2, 2])
        self.assertEqual(sum(sum(d["errors"].values()) for d in docs), 0)
        intervals = [line for line in (results / "merged.hlog").read_text().splitlines()
                     if line and not line.startswith(("#", '"'))]
        self.assertTrue(intervals, "merged.hlog has no intervals")
        for line in intervals:
            self.assertRegex(line, r"^(Tag=[^,]+,)?[0-9.]+,[0-9.]+,[0-9.]+,HISTF", "an interval's histogram")

        # Everything down: the agents, then the server.
        for m in (manifest, server_manifest):
            d = self.podman("kube", "down", str(m))
            self.assertEqual(d.returncode, 0, d.stderr)
        for pod in (*names, server_pod):
            self.assertNotEqual(self.podman("pod", "exists", pod).returncode, 0, f"pod {pod} left after kube down")
        left = [n for n in self.podman("ps", "-a", "--format", "{{.Names}}").stdout.split() if self.name in n]
        self.assertEqual(left, [], "containers left after kube down")
        with self.assertRaises(OSError):
            http.client.HTTPConnection("127.0.0.1", port, timeout=2).connect()


if __name__ == "__main__":
    sys.exit(run_tests(sys.argv))
