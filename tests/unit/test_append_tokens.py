"""An APPEND (growing a replica of an open tail in place) needs its own block token: a write
token, handed out for writing a new unit once, never allows growing a committed unit."""

import pytest

from hedgefs.datanode.data_server import _TOKEN_OPS
from hedgefs.proto import datatransfer as dt
from hedgefs.security import tokens
from hedgefs.security.tokens import BlockTokens, TokenError


def test_a_write_token_does_not_allow_an_append_and_an_append_token_does():
    keys = BlockTokens(b"k" * 32, clock=lambda: 1000.0)
    assert _TOKEN_OPS[dt.OP_APPEND] == tokens.APPEND
    with pytest.raises(TokenError) as e:
        keys.check(keys.sign(tokens.WRITE, 7, 0, 9), _TOKEN_OPS[dt.OP_APPEND], 7, 0, 9)
    assert str(e.value) == "write token for unit 7/0 generation 9 does not allow append of unit 7/0 generation 9"
    assert keys.check(keys.sign(tokens.APPEND, 7, 0, 9), tokens.APPEND, 7, 0, 9).op == tokens.APPEND
    with pytest.raises(TokenError):          # nor does an append token allow a write
        keys.check(keys.sign(tokens.APPEND, 7, 0, 9), tokens.WRITE, 7, 0, 9)
