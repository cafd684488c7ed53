//! Tests for the netlink client.
