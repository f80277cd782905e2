"""What a trial-deployed configuration task declares: stub upstreams and HTTP probes (nginx,
HAProxy), or rule unit tests (Prometheus rules).

A reverse-proxy task (``ConfigSpec.schema_kind`` ``nginx`` or ``haproxy``) carries an
``HttpDeploy``: the port the candidate's server must listen on (127.0.0.1 only), the stub
upstreams the verifier starts beside it (each a small HTTP server on 127.0.0.1:port that
records what it receives and answers with its own name), and the probes: requests sent in
order, each compared with its ``HttpExpect`` and counted as one check. A Prometheus task
(``prometheus_rules``) carries ``RuleTest`` groups in the shape of ``promtool test rules``
files, each one check.

The stubs answer every request with status ``status`` (default 200), the header
``X-Upstream: <name>`` and the body ``upstream=<name>\\n``.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tasksieve.schemas.strict import STRICT, JsonInt

NAME = r"^[a-z][a-z0-9_-]{0,39}$"
HEADER = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$"
NO_UPSTREAM = "none"
"""``HttpExpect.upstream`` value meaning that no stub may receive the request."""


class _Strict(BaseModel):
    model_config = ConfigDict(**STRICT, frozen=True)


class HttpUpstream(_Strict):
    """A stub upstream: a recording HTTP server on 127.0.0.1:``port`` inside the sandbox."""

    name: str = Field(pattern=NAME)
    port: JsonInt = Field(ge=1024, le=65535)
    status: JsonInt = Field(default=200, ge=200, le=599, description="Status it answers with.")

    @model_validator(mode="after")
    def _not_reserved(self) -> HttpUpstream:
        if self.name == NO_UPSTREAM:
            raise ValueError(f"upstream name {NO_UPSTREAM!r} is reserved (no upstream)")
        return self


class HttpExpect(_Strict):
    """What one probe must observe; a field left out is not checked.

    ``upstream``: the stub that must receive the request (exactly one request, to it), or
    ``"none"`` when no stub may receive it. ``upstream_path``: the path and query that stub
    saw. ``upstream_headers``: request headers the stub must have seen with exactly these
    values (names case-insensitive); ``upstream_headers_absent``: headers it must not have
    seen. ``headers``: response headers with exact values; ``body_contains``: a substring of
    the response body.
    """

    status: JsonInt | None = Field(default=None, ge=100, le=599)
    upstream: str | None = Field(default=None, pattern=NAME)
    upstream_path: str | None = Field(default=None, max_length=2000)
    upstream_headers: dict[str, str] = Field(default_factory=dict)
    upstream_headers_absent: list[str] = Field(default_factory=list)
    headers: dict[str, str] = Field(default_factory=dict)
    body_contains: str | None = Field(default=None, max_length=2000)

    @model_validator(mode="after")
    def _something(self) -> HttpExpect:
        names = [*self.upstream_headers, *self.upstream_headers_absent, *self.headers]
        bad = [n for n in names if not _header_name(n)]
        if bad:
            raise ValueError(f"not HTTP header names: {bad}")
        if self.model_dump(exclude_defaults=True) == {}:
            raise ValueError("expect checks nothing: give status, upstream, headers, ...")
        return self


class HttpProbe(_Strict):
    """One request sent to the candidate's server, and what it must observe."""

    name: str = Field(pattern=NAME)
    method: str = Field(default="GET", pattern=r"^[A-Z]{1,16}$")
    path: str = Field(pattern=r"^/[\x21-\x7e]{0,2000}$", description="Path and query.")
    headers: dict[str, str] = Field(default_factory=dict)
    body: str = Field(default="", max_length=100_000)
    expect: HttpExpect

    @model_validator(mode="after")
    def _headers(self) -> HttpProbe:
        bad = [n for n in self.headers if not _header_name(n)]
        if bad:
            raise ValueError(f"probe {self.name!r}: not HTTP header names: {bad}")
        if any("\r" in v or "\n" in v for v in self.headers.values()):
            raise ValueError(f"probe {self.name!r}: a header value holds a line break")
        return self


class HttpDeploy(_Strict):
    """The deployment of an nginx or HAProxy task: listen port, stub upstreams, probes."""

    listen_port: JsonInt = Field(ge=1024, le=65535, description="The server listens here.")
    upstreams: list[HttpUpstream] = Field(default_factory=list, max_length=16)
    probes: list[HttpProbe] = Field(min_length=1, max_length=200)
    ready_timeout_s: float = Field(default=5.0, gt=0, le=60)
    probe_timeout_s: float = Field(default=3.0, gt=0, le=60)

    @model_validator(mode="after")
    def _consistent(self) -> HttpDeploy:
        names = [u.name for u in self.upstreams]
        ports = [u.port for u in self.upstreams] + [self.listen_port]
        if len(set(names)) != len(names):
            raise ValueError(f"upstream names repeat: {names}")
        if len(set(ports)) != len(ports):
            raise ValueError(f"ports repeat (listen_port and upstreams): {ports}")
        probes = [p.name for p in self.probes]
        if len(set(probes)) != len(probes):
            raise ValueError(f"probe names repeat: {probes}")
        for p in self.probes:
            want = p.expect.upstream
            if want is not None and want != NO_UPSTREAM and want not in names:
                raise ValueError(f"probe {p.name!r} expects unknown upstream {want!r}")
        return self


class SeriesInput(_Strict):
    """One input series in promtool's expanding notation, e.g. ``0+10x10``."""

    series: str = Field(min_length=1, max_length=2000)
    values: str = Field(min_length=1, max_length=5000)


class ExpectedAlert(_Strict):
    exp_labels: dict[str, str] = Field(default_factory=dict)
    exp_annotations: dict[str, str] = Field(default_factory=dict)


class AlertTest(_Strict):
    eval_time: str = Field(pattern=r"^[0-9]+[smhdwy]$")
    alertname: str = Field(min_length=1, max_length=200)
    exp_alerts: list[ExpectedAlert] = Field(default_factory=list)


class ExpectedSample(_Strict):
    labels: str = Field(min_length=1, max_length=2000)
    value: float


class ExprTest(_Strict):
    expr: str = Field(min_length=1, max_length=5000)
    eval_time: str = Field(pattern=r"^[0-9]+[smhdwy]$")
    exp_samples: list[ExpectedSample] = Field(default_factory=list)


class RuleTest(_Strict):
    """One ``promtool test rules`` test group: input series, then alert and expression tests."""

    name: str = Field(pattern=NAME)
    interval: str = Field(default="1m", pattern=r"^[0-9]+[smhdwy]$")
    input_series: list[SeriesInput] = Field(min_length=1, max_length=200)
    alert_rule_test: list[AlertTest] = Field(default_factory=list)
    promql_expr_test: list[ExprTest] = Field(default_factory=list)

    @model_validator(mode="after")
    def _tests(self) -> RuleTest:
        if not self.alert_rule_test and not self.promql_expr_test:
            raise ValueError(f"rule test {self.name!r} needs alert_rule_test or promql_expr_test")
        return self


def _header_name(name: str) -> bool:
    return re.fullmatch(HEADER, name) is not None
