"""One settings object for the server (DESIGN.md invariant 7): ``GPUPOOL_`` environment
variables, an optional TOML or YAML file, then explicit overrides from the command line."""

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
    YamlConfigSettingsSource,
)

from gpupool.model import SpecError
from gpupool.scheduler.placer import POLICY_NAMES


class Settings(BaseSettings):
    """Server configuration. ``database_url`` empty means SQLite at ``DATA_DIR/gpupool.db``."""

    model_config = SettingsConfigDict(env_prefix="GPUPOOL_", extra="forbid")

    data_dir: Path = Path("data")
    database_url: str = ""
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    policy: str = "auto"
    cycle_interval_s: float = Field(2.0, gt=0, le=300)  # at least this often
    cycle_min_gap_s: float = Field(0.05, ge=0, le=10)  # at most this often
    grace_s: int = Field(30, ge=0)
    leader_poll_s: float = Field(1.0, gt=0, le=10)
    # a node silent this long is lost: its jobs are requeued (or failed, per job)
    heartbeat_timeout_s: float = Field(30.0, gt=0, le=86400 * 365)
    log_level: str = "info"
    log_json: bool = True

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        if value not in POLICY_NAMES:
            raise ValueError(f"policy must be one of {', '.join(POLICY_NAMES)}")
        return value

    @property
    def db_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'gpupool.db').resolve()}"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Settings from the environment, then ``config`` (TOML or YAML), then ``overrides``
    (command-line flags; ``None`` values are ignored)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if config is None:
        return Settings(**given)
    if not config.is_file():
        raise SpecError(f"config: {config} is not a file", field="config")
    suffix = config.suffix.lower()
    if suffix == ".toml":
        source: PydanticBaseSettingsSource = TomlConfigSettingsSource(Settings, config)
    elif suffix in (".yaml", ".yml"):
        source = YamlConfigSettingsSource(Settings, config)
    else:
        raise SpecError(f"config: {config.name} must end in .toml, .yaml or .yml", field="config")
    try:
        from_file = source()
    except Exception as exc:  # a parser's own error type differs per format
        raise SpecError(f"config: {config.name} cannot be read: {exc}", field="config") from None
    env_only = Settings()
    merged = {**from_file, **{k: getattr(env_only, k) for k in env_only.model_fields_set}}
    return Settings(**{**merged, **given})
