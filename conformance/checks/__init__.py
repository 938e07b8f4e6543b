"""The conformance checks: one pytest test per checkable fact, each citing its requirements.

Run them with ``genapi-conformance run`` or ``pytest --pyargs conformance.checks --profile
FILE``. Where a new check goes and how it is written:

* **One file per area and aspect**, named ``test_<area>_<aspect>.py`` (``test_tier.py``,
  ``test_signature_hmac.py``, ``test_url_rebind.py``); no module over ~600 lines.
* **Names you can grep**: ``test_<subject>_<condition>_<expected>``, e.g.
  ``test_tier_with_api_key_returns_2xx_with_all_fields``; parametrised cases get readable
  ids (``id="name-to-private-10.0.0.1-400"``).
* **Cite every requirement the check proves** with
  ``@pytest.mark.requirement("TIER-READ-01", ...)``: ids from
  ``conformance/requirements.yaml``. Collection fails on an unknown id, and on a check
  here that cites none. A failed check of an ``INTERPRETATION`` only warns.
* **A one-sentence docstring** says what the check proves.
* **Send the request under test by hand** through the ``api`` fixture
  (``api.request(method, path, role=..., json=...)``): the exact method, path, headers and
  body, so a failure shows what was sent. Helpers only set things up (create a webhook,
  wait for deliveries); assertion messages say what was expected and what was seen.
* **A failure blames one cited id, or all of them**: the judging helpers
  (``conformance.judge.asserts``) and ``fail``/``warn`` (``conformance.findings``) take a
  ``rule`` only where the check cites several ids, and then exactly one of them; what was
  sent or waited for goes into the message, never into the rule.
* **Set up once per module** what costs a generation, through the ``labs`` fixture: a
  module-scoped fixture returns ``labs.events(name, *started)`` (event scenarios),
  ``labs.chains(name)`` (delivery chains) or ``labs.paths(name)`` (real ids for paths),
  which are closed after the module's last check.
* **Never sleep to synchronise**: wait for an event with a deadline
  (``endpoint.wait_for(count, timeout)``); where the event's arrival is what the check
  judges, submit to the ``delivery_target`` fixture and wait with
  ``assert_delivered(delivery_target, what)`` (``conformance.judge.asserts``).
* **A capability the profile lacks is a skip, never a failure**:
  ``pytest.skip("needs <capability>: <what to add to the profile>")``; ``profile.key(role)``
  raises a skip by itself, and the ``needs`` markers (``dns``, ``console``, ``adapter``,
  ``destructive``) and the catalog's ``needs`` skip automatically.
"""
