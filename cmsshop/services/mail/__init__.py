"""E-mail through a transactional outbox.

outbox    enqueue(): render a message from templates/mail/ and write it as a row in
          the caller's transaction (once per dedupe key)
headers   header values from typed text: no line breaks, no encoded words
delivery  building the MIME message; the SMTP and local-folder backends
sender    delivering due rows with retries and back-off, never two senders on a row
"""
