"""Phone numbers and e-mail addresses (phonenumbers, email-validator): what the old regexes let through."""

import pytest
from switchboard.agent.builtin_tools import CustomerProfileUpdate
from switchboard.handoff import normalize_phone
from switchboard.validation import normalize_email, normalize_phone_e164


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("+1 (212) 555-0123", "+12125550123"),
        ("+351 912 345 678", "+351912345678"),
        ("4915112345678", "+4915112345678"),
        ("+44 7911 123456", "+447911123456"),
    ],
)
def test_valid_numbers_are_stored_as_e164(value, expected):
    assert normalize_phone_e164(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("+1 555 010 2030", "not a valid phone number for its country code"),  # area code 555 does not exist
        ("+351 91", "not a valid phone number for its country code"),  # too short for Portugal
        ("+999 1234567", "not a phone number: start with the country code"),  # no such country code
        ("1234567", "not a valid phone number for its country code"),
        ("0044 7911 123456", "not a phone number: start with the country code"),
    ],
)
def test_numbers_the_old_regex_accepted_are_refused(value, message):
    """``^\\+?[0-9][0-9 ().-]{5,24}$`` accepted every one of these."""
    with pytest.raises(ValueError, match=f"^{message}"):
        normalize_phone_e164(value)


def test_agents_numbers_need_only_be_possible_so_examples_work():
    assert normalize_phone("+1 (555) 010-2030") == "15550102030"
    assert normalize_phone("15550100099") == "15550100099"
    for bad in ("012345678", "+1 555", "+999 1234567", ""):
        with pytest.raises(ValueError, match="invalid phone"):
            normalize_phone(bad)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("Ana@Example.com", "ana@example.com"), ("user@sub.example.co.uk", "user@sub.example.co.uk")],
)
def test_emails_are_normalized(value, expected):
    assert normalize_email(value) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("a..b@example.com", "An email address cannot have two periods in a row."),
        ("ana@-example.com", "An email address cannot have a hyphen immediately after the @-sign."),
        (".ana@example.com", "An email address cannot start with a period."),
        ("ana@exa_mple.com", "The part after the @-sign contains invalid characters: '_'."),
        ("ana()@example.com", "The email address contains invalid characters before the @-sign: '(', ')'."),
    ],
)
def test_emails_the_old_regex_accepted_are_refused(value, message):
    """``^[^@\\s]{1,64}@[^@\\s]{1,255}\\.[A-Za-z]{2,63}$`` accepted every one of these."""
    with pytest.raises(ValueError) as caught:
        normalize_email(value)
    assert str(caught.value) == f"not an e-mail address: {message}"


def test_save_customer_profile_fields_use_them():
    update = CustomerProfileUpdate(email="Ana@Example.com", phone="+351 912 345 678")
    assert (update.email, update.phone) == ("ana@example.com", "+351912345678")
    with pytest.raises(ValueError, match="not a valid phone number"):
        CustomerProfileUpdate(phone="+1 555 010 2030")
