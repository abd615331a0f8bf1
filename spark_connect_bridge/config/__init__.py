"""The config model: declared keys parsed once into typed values, plus config files and providers."""

from .definition import HIDDEN, NO_DEFAULT, Config, ConfigDef, ConfigKey, Importance, Password, Type
from .files import ConnectorRequest, load_config_file, load_config_text, parse_properties
from .providers import ProviderPolicy, resolve_providers
from .validators import CaseInsensitiveValidString, Lambda, NonEmptyString, Range, Regex, ValidList, ValidString, all_of

__all__ = [
    "Config", "ConfigDef", "ConfigKey", "Importance", "Password", "Type", "NO_DEFAULT", "HIDDEN",
    "ConnectorRequest", "load_config_file", "load_config_text", "parse_properties", "resolve_providers",
    "ProviderPolicy",
    "Range", "ValidString", "CaseInsensitiveValidString", "ValidList", "NonEmptyString", "Regex", "Lambda", "all_of",
]
