//! "You may not need a lock": work the database can make safe by itself. The tables
//! (one item in stock, users, three queued jobs, an account with a version number), the operations the lesson steps use,
//! and the SQL each one is, shown to the learner word for word on both backends.
//!
//! The simulator's model of these tables lives here too ([`Tables`]); PostgreSQL runs
//! the statements for real (`postgres.rs`).

use std::collections::{BTreeMap, HashMap};

/// Jobs in the queue at the start of a run.
pub const JOBS: i64 = 3;
/// Items in stock at the start of a run: the last one.
pub const STOCK: i64 = 1;
/// The account's balance at the start of a run (its version starts at 1).
pub const BALANCE: i64 = 100;
/// What each `write-balance` adds: the same for every worker, so two deposits built
/// on the same read record the same result and the checker sees the lost one.
pub const DEPOSIT: i64 = 50;
/// How many times a `retry` write tries before it gives up: bounded, so two workers
/// that keep beating each other cannot loop for ever.
pub const CAS_TRIES: usize = 3;

/// One operation on the tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlOp {
    ReadStock,
    /// The naive write: set the stock to what was read, minus one.
    SetStock {
        seen: i64,
    },
    /// The conditional update.
    TakeStock,
    FindUser {
        email: String,
    },
    AddUser {
        email: String,
        unique: bool,
    },
    ClaimJob {
        skip_locked: bool,
    },
    FinishJob {
        job: i64,
    },
    /// `SELECT balance, version`: the value is the balance, the version comes along.
    ReadBalance,
    /// Deposit onto the balance read at `version`: the new balance is computed from
    /// the read, and (`if_version`) the row changes only if nobody wrote since.
    WriteBalance {
        seen: i64,
        version: i64,
        if_version: bool,
    },
}

/// What the database answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlReply {
    /// Rows returned or changed.
    pub rows: u64,
    /// The value read (stock left, users found, the job's id), if any.
    pub value: Option<i64>,
    /// What happened in the world, when something did ("sold 1 (stock was 1)"); it is
    /// recorded in the storage, and the same result twice is a violation.
    pub result: Option<String>,
    /// The row's version, for a read that returns one (`SELECT balance, version`).
    pub version: Option<i64>,
}

impl SqlReply {
    /// A read: rows returned and the value read.
    pub fn read(rows: u64, value: Option<i64>) -> Self {
        SqlReply { rows, value, result: None, version: None }
    }

    /// A change of `rows` rows that made nothing happen in the world.
    pub fn rows(rows: u64) -> Self {
        SqlReply::read(rows, None)
    }

    /// One row changed, and `result` happened.
    pub fn done(result: String) -> Self {
        SqlReply { result: Some(result), ..SqlReply::rows(1) }
    }
}

impl SqlOp {
    /// The reply as the commands inspector shows it: psql's command tag ("UPDATE 0",
    /// "INSERT 0 1"), after the value a read returned.
    pub fn reply_shown(&self, reply: &SqlReply) -> String {
        let rows = reply.rows;
        match (self, reply.value, reply.version) {
            (SqlOp::AddUser { .. }, ..) => format!("INSERT 0 {rows}"),
            (
                SqlOp::SetStock { .. }
                | SqlOp::TakeStock
                | SqlOp::FinishJob { .. }
                | SqlOp::WriteBalance { .. },
                ..,
            ) => format!("UPDATE {rows}"),
            (_, Some(value), Some(version)) => {
                format!("{value}, version {version} · SELECT {rows}")
            }
            (_, Some(value), None) => format!("{value} · SELECT {rows}"),
            (_, None, _) => format!("SELECT {rows}"),
        }
    }

    /// The statement as the learner sees it (table names without the run's schema).
    pub fn statement(&self) -> String {
        match self {
            SqlOp::ReadStock => "SELECT qty FROM items WHERE id = 1".into(),
            SqlOp::SetStock { seen } => format!("UPDATE items SET qty = {} WHERE id = 1", seen - 1),
            SqlOp::TakeStock => "UPDATE items SET qty = qty - 1 WHERE id = 1 AND qty > 0".into(),
            SqlOp::FindUser { email } => {
                format!("SELECT count(*) FROM users WHERE email = '{email}'")
            }
            SqlOp::AddUser { email, unique: false } => {
                format!("INSERT INTO users (email) VALUES ('{email}')")
            }
            SqlOp::AddUser { email, unique: true } => format!(
                "INSERT INTO users_unique (email) VALUES ('{email}') ON CONFLICT DO NOTHING"
            ),
            SqlOp::ClaimJob { skip_locked: true } => "BEGIN; SELECT id FROM jobs WHERE state = \
                'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
                .into(),
            SqlOp::ClaimJob { skip_locked: false } => {
                "SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1".into()
            }
            SqlOp::FinishJob { job } => {
                format!("UPDATE jobs SET state = 'done' WHERE id = {job}")
            }
            SqlOp::ReadBalance => "SELECT balance, version FROM accounts WHERE id = 1".into(),
            SqlOp::WriteBalance { seen, version, if_version } => {
                let check =
                    if *if_version { format!(" AND version = {version}") } else { "".into() };
                format!(
                    "UPDATE accounts SET balance = {}, version = version + 1 WHERE id = 1{check}",
                    seen + DEPOSIT
                )
            }
        }
    }
}

/// The result recorded for a sale, a sign-up, a finished job.
pub fn sold(stock_before: i64) -> String {
    format!("sold 1 (stock was {stock_before})")
}

pub fn signed_up(email: &str) -> String {
    format!("signed up {email}")
}

pub fn did_job(job: i64) -> String {
    format!("did job {job}")
}

/// Two deposits built on the same read record the same result: one of them is lost.
pub fn deposited(seen: i64, version: i64) -> String {
    format!("+{DEPOSIT} onto {seen} (version {version})")
}

/// The simulator's tables for one run.
#[derive(Debug, Clone)]
pub struct Tables {
    stock: i64,
    users: Vec<String>,
    users_unique: Vec<String>,
    /// Job id -> done; and who holds each job's row lock (a client id).
    done: BTreeMap<i64, bool>,
    locked_by: HashMap<i64, u64>,
    /// The account: balance and version.
    balance: (i64, i64),
}

impl Default for Tables {
    fn default() -> Self {
        Tables {
            stock: STOCK,
            users: Vec::new(),
            users_unique: Vec::new(),
            done: (1..=JOBS).map(|j| (j, false)).collect(),
            locked_by: HashMap::new(),
            balance: (BALANCE, 1),
        }
    }
}

impl Tables {
    /// Run `op` for client `client` (row locks belong to a client's open transaction).
    pub fn apply(&mut self, client: u64, op: &SqlOp) -> SqlReply {
        let none = |rows| SqlReply::rows(rows);
        match op {
            SqlOp::ReadStock => SqlReply::read(1, Some(self.stock)),
            SqlOp::SetStock { seen } => {
                self.stock = seen - 1;
                SqlReply::done(sold(*seen))
            }
            SqlOp::TakeStock if self.stock > 0 => {
                self.stock -= 1;
                SqlReply::done(sold(self.stock + 1))
            }
            SqlOp::TakeStock => none(0),
            SqlOp::FindUser { email } => {
                let found = self.users.iter().filter(|u| *u == email).count() as i64;
                SqlReply::read(1, Some(found))
            }
            SqlOp::AddUser { email, unique: false } => {
                self.users.push(email.clone());
                SqlReply::done(signed_up(email))
            }
            SqlOp::AddUser { email, unique: true } if self.users_unique.contains(email) => none(0),
            SqlOp::AddUser { email, unique: true } => {
                self.users_unique.push(email.clone());
                SqlReply::done(signed_up(email))
            }
            SqlOp::ReadBalance => {
                let (balance, version) = self.balance;
                SqlReply { version: Some(version), ..SqlReply::read(1, Some(balance)) }
            }
            SqlOp::WriteBalance { version, if_version: true, .. } if *version != self.balance.1 => {
                none(0)
            }
            SqlOp::WriteBalance { seen, version, .. } => {
                self.balance = (seen + DEPOSIT, self.balance.1 + 1);
                SqlReply::done(deposited(*seen, *version))
            }
            SqlOp::ClaimJob { skip_locked } => {
                let free = |j: &i64| !*skip_locked || !self.locked_by.contains_key(j);
                let job = self.done.iter().find(|(j, done)| !**done && free(j)).map(|(j, _)| *j);
                if let (Some(j), true) = (job, *skip_locked) {
                    self.locked_by.insert(j, client);
                }
                SqlReply::read(u64::from(job.is_some()), job)
            }
            SqlOp::FinishJob { job } => {
                self.done.insert(*job, true);
                self.locked_by.remove(job);
                SqlReply::done(did_job(*job))
            }
        }
    }

    /// The client's connection closed: its open transaction rolls back, its row locks go.
    pub fn disconnect(&mut self, client: u64) {
        self.locked_by.retain(|_, c| *c != client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_conditional_update_sells_the_last_item_once() {
        let mut t = Tables::default();
        assert_eq!(t.apply(1, &SqlOp::TakeStock).result, Some(sold(1)));
        assert_eq!(t.apply(2, &SqlOp::TakeStock), SqlReply::rows(0));
        assert_eq!(t.apply(2, &SqlOp::ReadStock).value, Some(0));
    }

    #[test]
    fn a_version_check_refuses_the_write_built_on_a_stale_read() {
        for if_version in [false, true] {
            let mut t = Tables::default();
            let read = t.apply(1, &SqlOp::ReadBalance);
            assert_eq!((read.value, read.version), (Some(BALANCE), Some(1)));
            let write = SqlOp::WriteBalance { seen: BALANCE, version: 1, if_version };
            assert_eq!(t.apply(2, &write).result, Some(deposited(BALANCE, 1)));
            // The second write was computed from the same read: lost without the check.
            assert_eq!(t.apply(1, &write).rows, u64::from(!if_version));
            let after = t.apply(1, &SqlOp::ReadBalance);
            assert_eq!(
                (after.value, after.version),
                (Some(BALANCE + DEPOSIT), Some(2 + u64::from(!if_version) as i64))
            );
        }
    }

    #[test]
    fn the_inspector_shows_psql_command_tags() {
        let mut t = Tables::default();
        let read = SqlOp::ReadBalance;
        assert_eq!(read.reply_shown(&t.apply(1, &read)), "100, version 1 · SELECT 1");
        let stale = SqlOp::WriteBalance { seen: 0, version: 7, if_version: true };
        assert_eq!(stale.reply_shown(&t.apply(1, &stale)), "UPDATE 0");
        let add = SqlOp::AddUser { email: "a@b.c".into(), unique: true };
        assert_eq!(add.reply_shown(&t.apply(1, &add)), "INSERT 0 1");
    }

    #[test]
    fn skip_locked_skips_a_claimed_job_until_its_holder_disconnects() {
        let mut t = Tables::default();
        let claim = SqlOp::ClaimJob { skip_locked: true };
        assert_eq!(t.apply(1, &claim).value, Some(1));
        assert_eq!(t.apply(2, &claim).value, Some(2));
        // A plain SELECT does not see row locks.
        assert_eq!(t.apply(3, &SqlOp::ClaimJob { skip_locked: false }).value, Some(1));
        t.disconnect(1);
        assert_eq!(t.apply(3, &claim).value, Some(1));
    }

    #[test]
    fn a_unique_key_refuses_the_second_sign_up_and_a_plain_table_does_not() {
        let mut t = Tables::default();
        let email = "ann@example.com".to_string();
        for unique in [false, true] {
            let add = SqlOp::AddUser { email: email.clone(), unique };
            assert_eq!(t.apply(1, &add).rows, 1);
            assert_eq!(t.apply(2, &add).rows, u64::from(!unique));
        }
    }
}
