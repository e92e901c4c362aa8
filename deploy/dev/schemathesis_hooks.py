"""schemathesis hooks for fuzzing capstan's REST API (deploy/dev/schemathesis.sh loads this file).

Three kinds of generated request are changed just before they are sent; every other request
goes out as generated.

- `POST /cluster/members` makes the worker connect to the new member's `raft_addr` (a probe: an
  unreachable member is refused after 3 s). Generated addresses could name any host, and a
  fuzzer must send traffic nowhere but this machine. So every generated address that could pass
  the worker's `host:port` check (any string holding a `:`) is replaced: `api_addr` by a
  loopback address where nothing listens, `raft_addr` by the raft address of a member, which
  the worker refuses at once (409 `member_address_in_use` or `member_id_in_use`); strings
  without a `:` are left as they are (the worker refuses them with 400 before connecting
  anywhere).
- `DELETE /cluster/members/{id}` with the id of a member other than the leader would really
  remove it (204): the rest of the run would then fuzz a smaller cluster, or, when the answering
  worker itself is removed, a worker outside the cluster. Such an id is replaced by the
  leader's (asked of the same worker just before, `GET /cluster`), whose removal the worker must
  refuse (409 `member_is_leader`). Unknown ids and malformed ones are sent as generated.
  (Removals themselves are tested in tests/tests/cluster_raft.rs.)
- `DELETE /pipelines/fuzz`: the pipeline `fuzz` is there for every other operation on
  /pipelines/{name} to reach past the 404 (deploy/dev/schemathesis.toml), and schemathesis also
  reuses the names `GET /pipelines` lists. Its deletion is sent for `fuzz-delete` instead, the
  pipeline created to be deleted.
"""

import requests
import schemathesis

# loopback, a port nothing listens on: the probe fails at once and the worker answers 409
# `member_unreachable`
UNREACHABLE_LOOPBACK = "127.0.0.1:1"
ADDRESS_FIELDS = ("raft_addr", "api_addr")
# the pipeline every operation on /pipelines/{name} may use, and the one deleted instead
KEPT_PIPELINE = "fuzz"
DELETED_PIPELINE = "fuzz-delete"


def _is(case, method, path):
    return case.operation.method.upper() == method and case.operation.path == path


def _as_member_id(value):
    """The member id the worker would read from this path segment, if it may be one."""
    if isinstance(value, bool):
        return None
    try:
        return int(str(value))
    except ValueError:
        return None


def _member_raft_addr(case):
    """The raft address of a member of the cluster (asked of the same worker)."""
    base = case.operation.schema.get_base_url().rstrip("/")
    reply = requests.get(f"{base}/cluster", timeout=10)
    reply.raise_for_status()
    members = reply.json()["members"]
    return members[0]["raft_addr"] if members else UNREACHABLE_LOOPBACK


@schemathesis.hook
def before_call(context, case, kwargs):
    if _is(case, "POST", "/cluster/members"):
        body = case.body
        if isinstance(body, dict):
            for field in ADDRESS_FIELDS:
                value = body.get(field)
                if isinstance(value, str) and ":" in value:
                    body[field] = UNREACHABLE_LOOPBACK
            # a raft address a member already has is refused before any probe (409
            # member_address_in_use): the worker would otherwise wait up to 3 s per request
            # for an address that never answers
            if isinstance(body.get("raft_addr"), str) and ":" in body["raft_addr"]:
                body["raft_addr"] = _member_raft_addr(case)
    elif _is(case, "DELETE", "/cluster/members/{id}"):
        member = _as_member_id(case.path_parameters.get("id"))
        if member is None:
            return
        base = case.operation.schema.get_base_url().rstrip("/")
        reply = requests.get(f"{base}/cluster", timeout=10)
        reply.raise_for_status()
        view = reply.json()
        members = {m["id"] for m in view["members"]}
        leader = view["leader"]
        if member in members and member != leader:
            # with no leader known (an election), 0: no member has it (404)
            case.path_parameters["id"] = leader if leader is not None else 0
    elif _is(case, "DELETE", "/pipelines/{name}"):
        if case.path_parameters.get("name") == KEPT_PIPELINE:
            case.path_parameters["name"] = DELETED_PIPELINE
