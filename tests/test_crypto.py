import pytest
from cryptography.fernet import Fernet
from switchboard.crypto import CredentialCipher, CredentialDecryptError, split_keys


def test_round_trip_and_ciphertext_hides_secret():
    cipher = CredentialCipher(Fernet.generate_key())
    token = cipher.encrypt({"access_token": "EAAG-secret", "phone_number_id": "106000000000001"})
    assert "EAAG-secret" not in token
    assert cipher.decrypt(token) == {"access_token": "EAAG-secret", "phone_number_id": "106000000000001"}


def test_wrong_key_is_a_clear_error():
    token = CredentialCipher(Fernet.generate_key()).encrypt({"a": 1})
    with pytest.raises(CredentialDecryptError, match="ENCRYPTION_KEY"):
        CredentialCipher(Fernet.generate_key()).decrypt(token)


def test_several_keys_first_encrypts_all_decrypt():
    old, new = Fernet.generate_key(), Fernet.generate_key()
    under_old = CredentialCipher(old).encrypt({"access_token": "EAAG-1"})
    ring = CredentialCipher(f"{new.decode()}, {old.decode()}")  # as in ENCRYPTION_KEY=NEW,OLD
    assert ring.key_count == 2
    assert ring.decrypt(under_old) == {"access_token": "EAAG-1"}
    under_new = ring.encrypt({"access_token": "EAAG-2"})
    assert CredentialCipher(new).decrypt(under_new) == {"access_token": "EAAG-2"}
    with pytest.raises(CredentialDecryptError):
        CredentialCipher(old).decrypt(under_new)
    rotated = ring.rotate(under_old)
    assert CredentialCipher(new).decrypt(rotated) == {"access_token": "EAAG-1"}


def test_split_keys():
    assert split_keys(b"a,b") == [b"a", b"b"]
    assert split_keys(" a , ,b ") == [b"a", b"b"]
    assert split_keys([b"a", "b"]) == [b"a", b"b"]
    with pytest.raises(ValueError, match="no encryption key"):
        CredentialCipher(" , ")
