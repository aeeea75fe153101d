import pytest
from cryptography.fernet import Fernet
from switchboard.crypto import CredentialCipher, CredentialDecryptError


def test_round_trip_and_ciphertext_hides_secret():
    cipher = CredentialCipher(Fernet.generate_key())
    token = cipher.encrypt({"access_token": "EAAG-secret", "phone_number_id": "106000000000001"})
    assert "EAAG-secret" not in token
    assert cipher.decrypt(token) == {"access_token": "EAAG-secret", "phone_number_id": "106000000000001"}


def test_wrong_key_is_a_clear_error():
    token = CredentialCipher(Fernet.generate_key()).encrypt({"a": 1})
    with pytest.raises(CredentialDecryptError, match="ENCRYPTION_KEY"):
        CredentialCipher(Fernet.generate_key()).decrypt(token)
