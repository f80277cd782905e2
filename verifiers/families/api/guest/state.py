"""The API harness's read-back of the final state of S3, SQS and CloudWatch Logs, capped.

Runs inside the sandbox (standard library only; the boto3 clients are passed in; inlined into
the harness by ``tasksieve.verifiers.sandbox.guest.bundle``). Objects are reported as size,
sha256 and a text preview, messages in receive order (consumed: read-back ends the run),
log events over all streams ordered by timestamp; each kind is capped and says when it was
truncated. It only reports data: the parent compares it with the expected state.

It does NOT see messages that are in flight or delayed (it counts them as ``hidden``), nor
read objects over the size caps (their digest is None).
"""

from __future__ import annotations

import hashlib
from typing import Any

MAX_OBJECTS = 5000
MAX_OBJECT_BYTES = 16_000_000
MAX_TOTAL_BYTES = 64_000_000
MAX_MESSAGES = 5000
MAX_EVENTS = 10000
PREVIEW_CHARS = 2000


def read_s3(s3: Any) -> dict[str, Any]:
    """Every bucket's objects as sha256, size and a text preview (capped in number)."""
    buckets: dict[str, dict[str, Any]] = {}
    seen, truncated, budget = 0, False, [MAX_TOTAL_BYTES]
    for b in s3.list_buckets().get("Buckets", []):
        name = b["Name"]
        objs: dict[str, Any] = {}
        buckets[name] = objs
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for o in page.get("Contents", []):
                if seen >= MAX_OBJECTS:
                    truncated = True
                    break
                seen += 1
                objs[o["Key"]] = _object(s3, name, o["Key"], int(o.get("Size", 0)), budget)
    return {"buckets": buckets, "truncated": truncated}


def _object(s3: Any, bucket: str, key: str, size: int, budget: list[int]) -> dict[str, Any]:
    """One object's digest and preview; not read (sha256 None) past the size caps."""
    if size > MAX_OBJECT_BYTES or size > budget[0]:
        return {"size": size, "sha256": None, "preview": "(not read: over the size cap)"}
    budget[0] -= size
    data = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    text = data[: PREVIEW_CHARS * 4].decode("utf-8", errors="replace")[:PREVIEW_CHARS]
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "preview": text}


def read_sqs(sqs: Any) -> dict[str, Any]:
    """Every queue's readable messages in receive order plus counts of unreadable ones."""
    queues: dict[str, Any] = {}
    urls: list[str] = []
    for page in sqs.get_paginator("list_queues").paginate():
        urls += page.get("QueueUrls", [])
    for url in urls:
        name = url.rstrip("/").rsplit("/", 1)[-1]
        keys = ["ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"]
        attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=keys)["Attributes"]
        hidden = sum(int(attrs.get(k, 0)) for k in keys)
        bodies: list[str] = []
        while len(bodies) < MAX_MESSAGES:
            msgs = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=43200, WaitTimeSeconds=0
            ).get("Messages", [])
            if not msgs:
                break
            bodies += [m["Body"] for m in msgs]
            entries = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(msgs)
            ]
            sqs.delete_message_batch(QueueUrl=url, Entries=entries)
        queues[name] = {
            "messages": bodies,
            "hidden": hidden,
            "truncated": len(bodies) >= MAX_MESSAGES,
        }
    return {"queues": queues}


def read_logs(logs: Any) -> dict[str, Any]:
    """Every log group's events over all streams, ordered by timestamp (capped)."""
    groups: dict[str, Any] = {}
    for page in logs.get_paginator("describe_log_groups").paginate():
        for g in page.get("logGroups", []):
            groups[g["logGroupName"]] = _group_events(logs, g["logGroupName"])
    return {"groups": groups}


def _group_events(logs: Any, group: str) -> dict[str, Any]:
    events: list[tuple[int, int, int, str]] = []
    streams: list[str] = []
    for page in logs.get_paginator("describe_log_streams").paginate(logGroupName=group):
        streams += [s["logStreamName"] for s in page.get("logStreams", [])]
    for si, stream in enumerate(streams):
        token: str | None = None
        while len(events) < MAX_EVENTS:
            kw: dict[str, Any] = {"logGroupName": group, "logStreamName": stream}
            kw.update({"nextToken": token} if token else {"startFromHead": True})
            resp = logs.get_log_events(**kw)
            for e in resp.get("events", []):
                events.append((int(e.get("timestamp", 0)), si, len(events), e["message"]))
            nxt = resp.get("nextForwardToken")
            if not resp.get("events") or not nxt or nxt == token:
                break
            token = nxt
    events.sort()
    return {"messages": [e[3] for e in events[:MAX_EVENTS]], "truncated": len(events) >= MAX_EVENTS}


def read_state(c: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The final state of all three services, and an error text per service that failed."""
    state: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name, reader in (("s3", read_s3), ("sqs", read_sqs), ("logs", read_logs)):
        try:
            state[name] = reader(c[name])
        except Exception as e:
            errors[name] = f"{type(e).__name__}: {e}"[:500]
    return state, errors
