//! The lab the packet-filtering tests share: a sandbox, a throwaway "node" namespace where the
//! plugins run, and a "client" namespace playing a second host on a veth (node 192.168.N.1,
//! client 192.168.N.2). `N` is allocated here, unique within the test binary, so network names,
//! subnets, bridge names and the owner records cnibox keeps on the host never collide between
//! tests running in parallel; nobody picks numbers by hand.
//!
//! A scenario is one function of a [`Variant`] (the reference plugin, or cnibox on a given
//! netfilter backend); [`variants!`](crate::variants) writes its `#[test]` wrappers.

use super::traffic::node_and_client;
use super::{Impl, NetNs, Plugin, Sandbox, dual, family, impl_available, require_root};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU8, Ordering};

/// Which implementation runs a scenario, and for cnibox which netfilter backend (`None`:
/// the key is left unset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub imp: Impl,
    pub backend: Option<&'static str>,
}

pub const REFERENCE: Variant = Variant {
    imp: Impl::Reference,
    backend: None,
};
/// Debian 12's v1.1.1: where an older node's behaviour is asserted.
pub const OLDER_REFERENCE: Variant = Variant {
    imp: Impl::OlderReference,
    backend: None,
};
pub const OURS_IPTABLES: Variant = Variant {
    imp: Impl::Ours,
    backend: Some("iptables"),
};
pub const OURS_NFTABLES: Variant = Variant {
    imp: Impl::Ours,
    backend: Some("nftables"),
};
pub const OURS_UNSET: Variant = Variant {
    imp: Impl::Ours,
    backend: None,
};

impl Variant {
    /// `ref`, `ours-iptables`, `ours-nftables`, `ours-default`: for messages.
    pub fn tag(self) -> String {
        match self.imp {
            Impl::Reference => "ref".into(),
            Impl::OlderReference => "ref-1.1.1".into(),
            Impl::Ours => format!("ours-{}", self.backend.unwrap_or("default")),
        }
    }
}

/// A number no other lab of this test binary has (20 … 250).
pub fn unique_n() -> u8 {
    static NEXT: AtomicU8 = AtomicU8::new(20);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    assert!((20..=250).contains(&n), "out of lab numbers");
    n
}

/// The Go side of a live-swap pair (one of them is [`Impl::Ours`]) as a variant with the backend
/// unset, for [`skip`].
pub fn go_side((first, second): (Impl, Impl)) -> Variant {
    Variant {
        imp: if first == Impl::Ours { second } else { first },
        backend: None,
    }
}

/// Skip a scenario when not root, or when it runs the reference and one of the reference
/// plugins it `needs` is missing (each a failure under `CNIBOX_REQUIRE_ALL=1`).
#[track_caller]
pub fn skip(test: &str, v: Variant, needs: &[&str]) -> bool {
    if !require_root(test) {
        return true;
    }
    v.imp != Impl::Ours && !needs.iter().all(|n| impl_available(v.imp, n))
}

/// See the module documentation. Test files add their scenario's own methods (network
/// configs, rule listings) in an `impl Lab` block of their own rather than wrapping it.
pub struct Lab {
    pub imp: Impl,
    pub backend: Option<&'static str>,
    pub n: u8,
    /// Whether the lab is dual-stack ([`Lab::with_v6`]).
    pub v6: bool,
    pub node: NetNs,
    pub client: NetNs,
    pub sb: Sandbox,
}

impl Lab {
    pub fn new(tag: &str, v: Variant) -> Lab {
        Lab::with_n(tag, v, unique_n())
    }

    /// A lab with number `n` from [`unique_n`], for labs that must match each other (twin
    /// nodes compared byte for byte); each still has its own namespaces and sandbox.
    pub fn with_n(tag: &str, v: Variant, n: u8) -> Lab {
        let sb = Sandbox::new(tag);
        let (node, client) = node_and_client(n);
        Lab {
            imp: v.imp,
            backend: v.backend,
            n,
            v6: false,
            node,
            client,
            sb,
        }
    }

    /// The lab made dual-stack, in the one IPv6 scheme of the kit: the node ↔ client link gets
    /// `fd00:N:1::1/64` and `::2` ([`dual::add_v6_link`]), containers use
    /// [`family::v6_subnet`] (`fd00:N::/64`) beside `10.N.0.0/24` ([`Lab::ranges`]).
    pub fn with_v6(mut self) -> Lab {
        dual::add_v6_link(&self);
        self.v6 = true;
        self
    }

    /// A route on the client to `dst` (IPv4 or IPv6) through the node.
    pub fn route_client_via_node(&self, dst: &str) {
        let v6 = dst.contains(':');
        let family = if v6 { "-6" } else { "-4" };
        self.client.sh(&[
            "ip",
            family,
            "route",
            "add",
            dst,
            "via",
            &dual::node_addr(self, v6),
        ]);
    }

    /// host-local `ranges` for the lab's containers: `10.N.0.0/24`, and `fd00:N::/64` when
    /// the lab is dual-stack.
    pub fn ranges(&self) -> Value {
        let mut ranges = vec![json!([{"subnet": family::v4_subnet(self.n)}])];
        if self.v6 {
            ranges.push(json!([{"subnet": family::v6_subnet(self.n)}]));
        }
        Value::Array(ranges)
    }

    pub fn variant(&self) -> Variant {
        Variant {
            imp: self.imp,
            backend: self.backend,
        }
    }

    /// The lab's implementation, run inside the node.
    pub fn plugin(&self) -> Plugin<'_> {
        self.sb.plugin_in(self.imp, &self.node)
    }

    /// Another implementation (or the same), inside the node.
    pub fn plugin_as(&self, imp: Impl) -> Plugin<'_> {
        self.sb.plugin_in(imp, &self.node)
    }

    pub fn node_addr(&self) -> String {
        format!("192.168.{}.1", self.n)
    }

    pub fn client_addr(&self) -> String {
        format!("192.168.{}.2", self.n)
    }
}

/// `variants!(scenario: name => VARIANT, …)`: one `#[test] fn name()` per variant, each calling
/// `scenario(VARIANT)`.
#[macro_export]
macro_rules! variants {
    ($scenario:ident: $($name:ident => $v:expr),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                $scenario($v)
            }
        )+
    };
}
