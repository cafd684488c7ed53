//! libcni's list operations (v1.3 `AddNetworkList`, `CheckNetworkList`, `DelNetworkList`,
//! `GCNetworkList`, `GetStatusNetworkList`): each plugin gets its config with the list's `name`
//! and `cniVersion`, `prevResult` and a `runtimeConfig` holding only the capabilities it
//! declares; ADD chains results in the order of the list and caches the last, stopping at the
//! first failure without undoing the plugins before it (the runtime's DEL does that, as with
//! libcni); CHECK gives every plugin the cached result converted to the list's version; DEL
//! runs the list in reverse with it and drops the record. A plugin that is this binary runs
//! in-process, any other is exec'd (`cni::delegate`, the path IPAM delegation takes).

use super::cache::{self, Rt};
use super::load::{NetList, Plugin, at_least};
use crate::cni::Applet;
use crate::cni::delegate;
use crate::cni::env::{Command, Env};
use crate::cni::error::{CodeContext, Error, Result, code};
use crate::cni::gojson::compact;
use crate::cni::result::CniResult;
use crate::cni::skel;
use crate::cni::version::Version;
use crate::undo::ErrorList;
use serde_json::{Map, Value};

pub(crate) struct Runner {
    pub(crate) applets: &'static [&'static Applet],
    /// CNI_PATH.
    pub(crate) path: String,
}

/// libcni's `pluginDescription`: `type="bridge"`, plus the plugin's own name when it has one.
fn describe(p: &Plugin) -> String {
    match p.name.as_str() {
        "" => format!("type={:?}", p.kind),
        name => format!("type={:?} name={name:?}", p.kind),
    }
}

fn wrap(p: &Plugin, verb: &str) -> impl FnOnce(Error) -> Error {
    let what = format!("plugin {} failed ({verb})", describe(p));
    move |e| e.ctx(what)
}

/// libcni's `buildOneConfig`: the plugin's config with the list's name and version, the
/// previous result, and `runtimeConfig` from the capabilities it declares (only when one of
/// them was given).
fn build(list: &NetList, p: &Plugin, prev: Option<&Value>, rt: Option<&Rt>) -> Map<String, Value> {
    let mut conf = p.conf.clone();
    conf.insert("name".into(), list.name.clone().into());
    conf.insert("cniVersion".into(), list.version.clone().into());
    if let Some(prev) = prev {
        conf.insert("prevResult".into(), prev.clone());
    }
    if let Some(rt) = rt {
        let mut rc = Map::new();
        for cap in &p.capabilities {
            if let Some(v) = rt.caps.get(cap) {
                rc.insert(cap.clone(), v.clone());
            }
        }
        if !rc.is_empty() {
            conf.insert("runtimeConfig".into(), Value::Object(rc));
        }
    }
    conf
}

/// A plugin's result as libcni reads it: in its own `cniVersion`, else the config's.
fn typed(v: &Value, conf_version: &str) -> Result<(Version, CniResult)> {
    let s = match v.get("cniVersion").and_then(Value::as_str) {
        Some(s) if !s.is_empty() => s,
        _ => conf_version,
    };
    let ver = Version::parse(s).ok_or_else(|| {
        Error::new(
            code::INCOMPATIBLE_VERSION,
            format!("unsupported CNI result version {s:?}"),
        )
    })?;
    Ok((ver, CniResult::from_value(v, ver)?))
}

fn list_version(list: &NetList) -> Result<Version> {
    Version::parse(&list.version).ok_or_else(|| {
        Error::new(
            code::INCOMPATIBLE_VERSION,
            format!("unsupported CNI version {:?}", list.version),
        )
    })
}

impl Runner {
    /// Run plugin `p` for `cmd` with `conf`; `rt` is the attachment (none for GC and STATUS,
    /// whose CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME and CNI_ARGS are empty, as libcni sends).
    fn run(
        &self,
        cmd: Command,
        p: &Plugin,
        conf: Map<String, Value>,
        rt: Option<&Rt>,
    ) -> Result<Option<String>> {
        let mut env = Env {
            command: cmd,
            container_id: String::new(),
            netns: String::new(),
            ifname: String::new(),
            args: String::new(),
            path: self.path.clone(),
        };
        if let Some(rt) = rt {
            env.container_id.clone_from(&rt.container_id);
            env.netns.clone_from(&rt.netns);
            env.ifname.clone_from(&rt.ifname);
            let pairs: Vec<String> = rt.args.iter().map(|[k, v]| format!("{k}={v}")).collect();
            env.args = pairs.join(";");
        }
        let path = delegate::find_in(&p.kind, &env)?;
        let applet = match delegate::resolve(self.applets, &p.kind, &path) {
            Some(None) => {
                return Err(Error::config(format!(
                    "type {:?}: {} is the cnibox binary, not a plugin: name one of its applets",
                    p.kind,
                    path.display()
                )));
            }
            Some(Some(applet)) => {
                // What the plugin's own process would check first (the attachment's names are
                // checked once, by `runtime::attachment`).
                skel::refuse_own_netns(&env)?;
                Some(applet)
            }
            None => None,
        };
        let config = compact(&Value::Object(conf));
        delegate::invoke(self.applets, applet, &path, config.as_bytes(), env)
    }

    /// ADD: the result to print (in the version the last plugin answered in).
    pub(crate) fn add(&self, list: &NetList, rt: &Rt) -> Result<String> {
        let mut prev: Option<(Version, CniResult)> = None;
        for p in &list.plugins {
            let step = || -> Result<(Version, CniResult)> {
                let prev = prev.as_ref().map(|(v, r)| r.to_value(*v)).transpose()?;
                let out = self.run(
                    Command::Add,
                    p,
                    build(list, p, prev.as_ref(), Some(rt)),
                    Some(rt),
                )?;
                let v: Value = serde_json::from_str(out.as_deref().unwrap_or_default())
                    .ctx_code(code::DECODE_FAILURE, "failed to unmarshal raw result")?;
                typed(&v, &list.version)
            };
            prev = Some(step().map_err(wrap(p, "add"))?);
        }
        let (ver, result) = prev.ok_or_else(|| Error::config("no plugin configs found"))?;
        cache::add(&list.name, &list.bytes, rt, result.to_value(ver)?)?;
        result.to_json(ver)
    }

    /// The cached result of the attachment in the list's version.
    fn cached(&self, list: &NetList, rt: &Rt) -> Result<Option<Value>> {
        let Some(v) = cache::result(&list.name, rt)? else {
            return Ok(None);
        };
        let (_, r) = typed(&v, "")?;
        r.to_value(list_version(list)?).map(Some)
    }

    pub(crate) fn check(&self, list: &NetList, rt: &Rt) -> Result<()> {
        if !at_least(&list.version, (0, 4, 0))? {
            return Err(Error::new(
                code::INCOMPATIBLE_VERSION,
                format!(
                    "configuration version {:?} does not support the CHECK command",
                    list.version
                ),
            ));
        }
        if list.disable_check {
            return Ok(());
        }
        let prev = self.cached(list, rt).map_err(|e| {
            e.ctx(format!(
                "failed to get network {:?} cached result",
                list.name
            ))
        })?;
        for p in &list.plugins {
            self.run(
                Command::Check,
                p,
                build(list, p, prev.as_ref(), Some(rt)),
                Some(rt),
            )?;
        }
        Ok(())
    }

    pub(crate) fn del(&self, list: &NetList, rt: &Rt) -> Result<()> {
        let prev = if at_least(&list.version, (0, 4, 0))? {
            // A record that cannot be read is dropped and DEL goes on without it (libcni).
            self.cached(list, rt).unwrap_or_else(|_| {
                cache::remove(&list.name, rt);
                None
            })
        } else {
            None
        };
        for p in list.plugins.iter().rev() {
            self.run(
                Command::Del,
                p,
                build(list, p, prev.as_ref(), Some(rt)),
                Some(rt),
            )
            .map_err(wrap(p, "delete"))?;
        }
        cache::remove(&list.name, rt);
        Ok(())
    }

    /// GC: the attachments of this network in the result cache are the valid ones (cnitool has
    /// no other record of what runs), sent to every plugin of a 1.1.0 list as
    /// `cni.dev/valid-attachments`, so each collects what it holds for anything else. Upstream
    /// cnitool passes no list, so libcni DELs every cached attachment of the network; cnibox
    /// keeps them. Every plugin runs; the failures are reported together.
    pub(crate) fn gc(&self, list: &NetList) -> Result<()> {
        let valid: Vec<(String, String)> = cache::attachments()
            .into_iter()
            .filter(|a| a.network == list.name)
            .map(|a| (a.container_id, a.ifname))
            .collect();
        self.gc_keeping(list, &valid)
    }

    /// Whether the list's GC runs at all (a 1.1.0 list without `disableGC`).
    pub(crate) fn gc_runs(list: &NetList) -> bool {
        !list.disable_gc && at_least(&list.version, (1, 1, 0)).unwrap_or(false)
    }

    /// GC with `valid` (container ID, ifname) as the valid attachments (`cnibox status --gc`
    /// passes the live ones).
    pub(crate) fn gc_keeping(&self, list: &NetList, valid: &[(String, String)]) -> Result<()> {
        if !Self::gc_runs(list) {
            return Ok(());
        }
        let valid: Vec<Value> = valid
            .iter()
            .map(|(cid, ifname)| serde_json::json!({"containerID": cid, "ifname": ifname}))
            .collect();
        let mut errors = ErrorList::new();
        for p in &list.plugins {
            let mut conf = build(list, p, None, None);
            conf.insert("cni.dev/valid-attachments".into(), valid.clone().into());
            // libcni still sends the name the spec used before July 2024.
            conf.insert("cni.dev/attachments".into(), valid.clone().into());
            let r = self.run(Command::Gc, p, conf, None);
            errors.check(r.map_err(|e| e.ctx(format!("failed to GC plugin {}", p.kind))));
        }
        errors.into_result()
    }

    /// STATUS of every plugin of a 1.1.0 list, in order; the first failure is the answer.
    pub(crate) fn status(&self, list: &NetList) -> Result<()> {
        if !at_least(&list.version, (1, 1, 0)).unwrap_or(false) {
            return Ok(());
        }
        for p in &list.plugins {
            self.run(Command::Status, p, build(list, p, None, None), None)?;
        }
        Ok(())
    }
}
