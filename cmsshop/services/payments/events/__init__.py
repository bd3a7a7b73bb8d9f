"""The provider event log and the provider-neutral handling of one webhook delivery.

Order of work for a delivery (each step says which transaction it runs in):

1. read the provider config (a short session of its own) and ``verify`` the signature --
   nothing is written before this; a failure is logged as ``rejected`` (own transaction)
   and answered 400;
2. ``interpret`` (no I/O), then log the event (own transaction, committed at once):
   insert ``received`` or, for a redelivery, count the attempt; in the same short
   transaction, read which order the event is about. An event already
   ``processed``/``duplicate``/``ignored`` is answered ``duplicate``, nothing else happens;
3. for a payment, ``confirm`` it with the provider API (or trust the verified event when
   the operator allows it, development only); for a ``capture`` action (the buyer
   approved), ask the provider to capture (``_capture``: idempotent, nothing marked paid).
   No lock is held during these network calls;
4. the business transaction (the request's, committed by pyramid_tm): its FIRST statement
   claims the event row (an UPDATE), then the order row is locked FOR UPDATE, the state
   machine acts, and the event's outcome is written in the same transaction -- so the
   outcome and the business rows commit together or not at all;
5. when that transaction aborts instead (409 unknown order, 503 provider down, any error,
   a failed commit), an after-abort hook records the failure on the event row in a
   transaction of its own, never overwriting a final status. The provider gets a non-2xx
   answer and delivers again; an admin can also reprocess from the stored payload.

Lock ordering: on SQLite our own transactions are never open while the request session
holds the write lock (steps 1-3 finish before step 4's first write; step 5 runs after the
abort released it). Making step 4's first statement a write also means the SQLite read
snapshot starts after our own commits, so it can be upgraded to a write. On PostgreSQL
the claim serialises deliveries of the same event and the order lock serialises
different events of the same payment; nobody waits while holding what the other needs.

Modules: ``errors`` (what the views map to HTTP), ``log`` (the event log rows),
``delivery`` (one delivery, steps 1-5), ``reprocess`` (admin), ``reading`` (admin).
"""
