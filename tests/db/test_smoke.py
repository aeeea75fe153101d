from sqlalchemy import text


async def test_pgvector_extension_is_at_least_0_8(session):
    version = (
        await session.exec(text("SELECT extversion FROM pg_extension WHERE extname = 'vector'"))
    ).scalar_one()
    major, minor = (int(part) for part in version.split(".")[:2])
    assert (major, minor) >= (0, 8)
