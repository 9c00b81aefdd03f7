//! The idle connections to the origin: one plain list per process, no lock (the runtime
//! has one thread, and the list is shared by its local tasks only).

use std::cell::RefCell;
use std::rc::Rc;

/// The most idle connections kept: more than the load's 64 client connections need.
const MAX_IDLE: usize = 1024;

/// Idle connections of any candidate's kind; a clone shares the list.
pub(crate) struct Idle<C>(Rc<RefCell<Vec<C>>>);

impl<C> Clone for Idle<C> {
    fn clone(&self) -> Self {
        Idle(Rc::clone(&self.0))
    }
}

impl<C> Idle<C> {
    /// An empty list.
    pub(crate) fn new() -> Self {
        Idle(Rc::new(RefCell::new(Vec::new())))
    }

    /// The connection used last (the likeliest to be open still), if any.
    pub(crate) fn take(&self) -> Option<C> {
        self.0.borrow_mut().pop()
    }

    /// Keeps `connection` for a later request, unless the list is full.
    pub(crate) fn put(&self, connection: C) {
        let mut idle = self.0.borrow_mut();
        if idle.len() < MAX_IDLE {
            idle.push(connection);
        }
    }
}
