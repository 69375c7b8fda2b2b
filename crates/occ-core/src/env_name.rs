//! Which environment variable names a Secret binding may set in a workload.
//!
//! A binding's value reaches the gateway's environment before anything in it runs, so a name
//! that a dynamic loader, an interpreter, a package manager, a TLS stack, a shell or OpenClaw
//! itself reads would let whoever may edit a Configuration change how the runtime starts
//! (`NODE_OPTIONS=--import=…` runs code as the workload's user). The rule is an allowlist of
//! shape plus a list of refused families:
//!
//! - a name is `^[A-Z][A-Z0-9_]{0,127}$` (upper case, starts with a letter, at most 128
//!   characters), so lower-case spellings such as `npm_config_*` or `http_proxy` cannot be
//!   bound at all;
//! - names in [`REFUSED_PREFIXES`], [`REFUSED_NAMES`] and [`PLATFORM_PREFIXES`] are refused:
//!   they configure the loader, Node and npm, Python, Git, shells, TLS, proxies, locale data,
//!   or occ and OpenClaw, or carry credentials occ delivers itself.
//!
//! Every Compute Driver also applies its own variables after the bindings, so even a name this
//! list missed cannot replace one the Driver sets.

/// Longest binding name.
pub const BINDING_NAME_MAX: usize = 128;

/// Names occ itself delivers to workloads (its own settings, the harness credential's
/// variables): a binding may not set them, while a document's `env` may name the provider-key
/// ones, since OpenClaw never lets its `env` block replace a variable the process already has.
pub const PLATFORM_PREFIXES: [&str; 4] = ["OCC_", "OPENAI_", "ANTHROPIC_", "CODEX_"];

/// Families of names that configure the runtime, its loaders and the programs it spawns:
/// neither a binding nor a document's `env` block may set anything starting with these.
pub const REFUSED_PREFIXES: [&str; 32] = [
    // OpenClaw itself (e.g. OPENCLAW_BROWSER_CONTROL_MODULE imports a module) and Kubernetes'
    // service discovery.
    "OPENCLAW_",
    "KUBERNETES_",
    // The dynamic loader and libc.
    "LD_",
    "DYLD_",
    "GLIBC_",
    "MALLOC_",
    "GCONV_",
    // Node, npm and the JavaScript package managers.
    "NODE_",
    "NPM_",
    "COREPACK_",
    "YARN_",
    "PNPM_",
    "BUN_",
    "DENO_",
    "V8_",
    "UV_",
    // Other interpreters and their package managers.
    "PYTHON",
    "PIP_",
    "PERL",
    "RUBY",
    "GEM_",
    "BUNDLE_",
    "JAVA_",
    "_JAVA_",
    "JDK_",
    // Git, SSH and GnuPG (spawned by tools and package managers).
    "GIT_",
    "SSH_",
    "GNUPG",
    // TLS stacks and trust stores.
    "SSL_",
    "OPENSSL_",
    // Desktop and telemetry plumbing OpenClaw and its libraries read.
    "XDG_",
    "OTEL_",
];

/// Single names a binding may not set.
pub const REFUSED_NAMES: [&str; 33] = [
    "PATH",
    "HOME",
    "TMPDIR",
    "TMP",
    "TEMP",
    "PWD",
    "USER",
    "LOGNAME",
    "SHELL",
    "BASH_ENV",
    "ENV",
    "IFS",
    "PS4",
    "PROMPT_COMMAND",
    "CDPATH",
    "LOCPATH",
    "HOSTALIASES",
    "LOCALDOMAIN",
    "RES_OPTIONS",
    "CLASSPATH",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "FTP_PROXY",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "LOG_FORMAT",
    "RUST_LOG",
    // Set by every Driver for the gateway (and for a dedicated gateway, its app-server token).
    "DO_NOT_TRACK",
];

/// Why `name` cannot be a binding's destination, or `None` when it can.
pub fn binding_name_refusal(name: &str) -> Option<BindingNameRefusal> {
    if name.chars().count() > BINDING_NAME_MAX {
        return Some(BindingNameRefusal::TooLong);
    }
    let mut chars = name.chars();
    let shaped = matches!(chars.next(), Some(c) if c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if !shaped {
        return Some(BindingNameRefusal::Format);
    }
    let refused = runtime_variable(name) || PLATFORM_PREFIXES.iter().any(|p| name.starts_with(p));
    refused.then_some(BindingNameRefusal::Reserved)
}

/// Whether `name` (compared in upper case: some programs read either spelling) configures the
/// runtime, its loaders or the programs it spawns ([`REFUSED_PREFIXES`], [`REFUSED_NAMES`],
/// proxies), so neither a binding nor a document's `env` block may set it.
pub fn runtime_variable(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    REFUSED_NAMES.contains(&name.as_str())
        || name == "APP_SERVER_TOKEN"
        || REFUSED_PREFIXES.iter().any(|p| name.starts_with(p))
        || name.ends_with("_PROXY")
}

/// How a binding name breaks the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingNameRefusal {
    /// Longer than [`BINDING_NAME_MAX`].
    TooLong,
    /// Not `^[A-Z][A-Z0-9_]*$`.
    Format,
    /// A name the runtime, its loaders or occ read.
    Reserved,
}

impl BindingNameRefusal {
    /// The message of the validation detail (never the name's value: names are not secret,
    /// but the detail's pointer already carries the name).
    pub fn message(self) -> &'static str {
        match self {
            Self::TooLong => "is too long (expected at most 128 characters)",
            Self::Format => {
                "must be an upper-case environment variable name: a letter, then letters, digits \
                 or underscores ([A-Z][A-Z0-9_]{0,127})"
            }
            Self::Reserved => {
                "is reserved: the runtime, its loaders, interpreters, package managers, TLS \
                 stack or occ read this variable, so a Secret cannot be bound to it"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_documents_env_may_name_provider_keys_but_not_runtime_switches() {
        for name in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "CODEX_ACCESS_TOKEN",
            "MY_VAR",
        ] {
            assert!(!runtime_variable(name), "{name}");
        }
        for name in [
            "OPENCLAW_BROWSER_CONTROL_MODULE",
            "node_options",
            "npm_config_prefix",
            "LD_PRELOAD",
            "http_proxy",
            "PATH",
        ] {
            assert!(runtime_variable(name), "{name}");
        }
    }

    #[test]
    fn ordinary_names_are_accepted() {
        for name in [
            "MODEL_KEY",
            "MY_PROVIDER_API_KEY",
            "A",
            "X1",
            "SLACK_BOT_TOKEN",
        ] {
            assert_eq!(binding_name_refusal(name), None, "{name}");
        }
        assert_eq!(binding_name_refusal(&"K".repeat(128)), None);
    }

    #[test]
    fn names_that_change_how_the_runtime_starts_are_refused() {
        for name in [
            "NODE_OPTIONS",
            "NODE_PATH",
            "NODE_EXTRA_CA_CERTS",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "DYLD_INSERT_LIBRARIES",
            "NPM_CONFIG_PREFIX",
            "OPENCLAW_GATEWAY_TOKEN",
            "OPENCLAW_CONFIG_PATH",
            "PATH",
            "HOME",
            "TMPDIR",
            "SSL_CERT_FILE",
            "BASH_ENV",
            "ENV",
            "PYTHONPATH",
            "PYTHONSTARTUP",
            "GIT_SSH_COMMAND",
            "GIT_CONFIG_GLOBAL",
            "HTTPS_PROXY",
            "SOCKS_PROXY",
            "OCC_AUTH_SECRET",
            "APP_SERVER_TOKEN",
            "DO_NOT_TRACK",
            "GLIBC_TUNABLES",
            "JAVA_TOOL_OPTIONS",
            "XDG_CONFIG_HOME",
        ] {
            assert_eq!(
                binding_name_refusal(name),
                Some(BindingNameRefusal::Reserved),
                "{name}"
            );
        }
    }

    #[test]
    fn the_shape_is_upper_case_and_bounded() {
        for name in [
            "npm_config_prefix",
            "http_proxy",
            "my_key",
            "_LEADING",
            "9BAD",
            "A-B",
            "",
            "É",
        ] {
            assert_eq!(
                binding_name_refusal(name),
                Some(BindingNameRefusal::Format),
                "{name}"
            );
        }
        assert_eq!(
            binding_name_refusal(&"K".repeat(129)),
            Some(BindingNameRefusal::TooLong)
        );
    }
}
