"""Users: creation, normalised e-mail addresses and argon2id password hashing."""
