"""Roost's patches to Thespian, applied before the actor system starts.

General layout: ``patches`` (indexed routing tables, quiet debug identities, the mailbox
swap), ``mailbox`` (mailboxes that survive a killed writer: one atomic write per frame,
spill files for large messages).
"""
