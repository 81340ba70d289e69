//! Storages the workers write to: a list on Redis, a PostgreSQL table, and the SQL
//! steps of the lessons that need no lock.

pub mod postgres;
pub mod redis;
pub mod sql;
