"""Callback-URL safety for the reference implementation (spec §4 "Callback URL requirements").

One job per module:

- :mod:`~reference.netguard.addresses`: which IP addresses are public (explicit IANA tables
  and embedded-IPv4 rules, ``fixtures/special_purpose_addresses.yaml``);
- :mod:`~reference.netguard.resolver`: bounded name resolution (system, hosts file, a DNS
  server);
- :mod:`~reference.netguard.urls`: :class:`CallbackPolicy`, the validator that pins the
  address to deliver to;
- :mod:`~reference.netguard.transport`: the delivery client that connects only to that
  address and, by default, only to loopback.

Typical use::

    policy = CallbackPolicy(SystemResolver(), allow_cidrs=("127.0.0.1/32",))
    target = await policy.validate(url)          # raises CallbackRejected(reason, rule)
    async with make_delivery_client(10.0) as client:
        await client.post(target.url, content=body,
                          extensions={"genapi.pinned_address": target.address})
"""

from __future__ import annotations

from reference.netguard.addresses import Classification, IPAddress, classify
from reference.netguard.resolver import (
    DnsServerResolver,
    HostNotResolved,
    HostsFileResolver,
    Resolver,
    SystemResolver,
)
from reference.netguard.transport import (
    PINNED_ADDRESS_EXTENSION,
    EgressRefused,
    GuardedTransport,
    make_delivery_client,
)
from reference.netguard.urls import (
    MAX_URL_LENGTH,
    CallbackPolicy,
    CallbackRejected,
    ValidatedTarget,
    mask_userinfo,
)

__all__ = [
    "MAX_URL_LENGTH",
    "PINNED_ADDRESS_EXTENSION",
    "CallbackPolicy",
    "CallbackRejected",
    "Classification",
    "DnsServerResolver",
    "EgressRefused",
    "GuardedTransport",
    "HostNotResolved",
    "HostsFileResolver",
    "IPAddress",
    "Resolver",
    "SystemResolver",
    "ValidatedTarget",
    "classify",
    "make_delivery_client",
    "mask_userinfo",
]
