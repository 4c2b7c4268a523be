//! A tiny reactor for async streams, so they need no runtime: one background thread per process
//! waits in poll(2) on the file descriptors of the completion queues that futures wait on, and
//! wakes those futures when their queue becomes readable. Each registration is one-shot (the fd
//! leaves the set once it fired), so a readable queue that is not yet drained never spins.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::raw::{c_int, c_short, c_ulong};
use std::os::unix::io::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::thread;

#[repr(C)]
struct PollFd {
    fd: c_int,
    events: c_short,
    revents: c_short,
}

const POLLIN: c_short = 0x001;

extern "C" {
    fn poll(fds: *mut PollFd, nfds: c_ulong, timeout: c_int) -> c_int;
}

/// Wakers waiting for each fd, with the id of their registration.
#[derive(Default)]
struct Interests {
    waiting: HashMap<RawFd, Vec<(u64, Waker)>>,
    next_id: u64,
}

pub(crate) struct Reactor {
    interests: Mutex<Interests>,
    /// Written to make the thread rebuild its set of fds.
    notify: UnixStream,
}

/// The process's reactor: started on first use, and again in a forked child (whose copy of the
/// parent's thread does not exist).
static REACTOR: Mutex<Option<(u32, Arc<Reactor>)>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing in this module panics while holding a lock; a poisoned one is still consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn reactor() -> io::Result<Arc<Reactor>> {
    let mut slot = lock(&REACTOR);
    let pid = std::process::id();
    if let Some((owner, reactor)) = slot.as_ref() {
        if *owner == pid {
            return Ok(reactor.clone());
        }
    }
    let (notify, listen) = UnixStream::pair()?;
    notify.set_nonblocking(true)?;
    listen.set_nonblocking(true)?;
    let reactor = Arc::new(Reactor {
        interests: Mutex::new(Interests::default()),
        notify,
    });
    let shared = reactor.clone();
    thread::Builder::new()
        .name("deepinfer-reactor".into())
        .spawn(move || shared.run(listen))?;
    *slot = Some((pid, reactor.clone()));
    Ok(reactor)
}

impl Reactor {
    fn run(&self, mut listen: UnixStream) {
        let mut fds = Vec::new();
        loop {
            fds.clear();
            fds.push(PollFd {
                fd: listen.as_raw_fd(),
                events: POLLIN,
                revents: 0,
            });
            fds.extend(lock(&self.interests).waiting.keys().map(|&fd| PollFd {
                fd,
                events: POLLIN,
                revents: 0,
            }));
            // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs.
            let n = unsafe { poll(fds.as_mut_ptr(), fds.len() as c_ulong, -1) };
            if n < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // Cannot wait any more: wake everyone so that no future hangs; they retry.
                let all = std::mem::take(&mut lock(&self.interests).waiting);
                all.into_values().flatten().for_each(|(_, w)| w.wake());
                thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
            if fds[0].revents != 0 {
                let mut sink = [0u8; 64];
                while matches!(listen.read(&mut sink), Ok(n) if n > 0) {}
            }
            let ready: Vec<Waker> = {
                let mut interests = lock(&self.interests);
                fds[1..]
                    .iter()
                    .filter(|p| p.revents != 0)
                    .filter_map(|p| interests.waiting.remove(&p.fd))
                    .flatten()
                    .map(|(_, w)| w)
                    .collect()
            };
            ready.into_iter().for_each(Waker::wake);
        }
    }
}

/// A waker waiting for one fd; dropping it withdraws the waker.
pub(crate) struct Registration {
    reactor: Arc<Reactor>,
    fd: RawFd,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut interests = lock(&self.reactor.interests);
        if let Some(list) = interests.waiting.get_mut(&self.fd) {
            list.retain(|(id, _)| *id != self.id);
            if list.is_empty() {
                interests.waiting.remove(&self.fd);
            }
        }
    }
}

/// Makes `waker` wake when `fd` becomes readable, reusing `slot`'s registration while it has not
/// fired yet.
pub(crate) fn register(
    slot: &mut Option<Registration>,
    fd: RawFd,
    waker: &Waker,
) -> io::Result<()> {
    if let Some(reg) = slot.as_ref() {
        if reg.fd == fd {
            let mut interests = lock(&reg.reactor.interests);
            if let Some(entry) = interests
                .waiting
                .get_mut(&fd)
                .and_then(|l| l.iter_mut().find(|(id, _)| *id == reg.id))
            {
                if !entry.1.will_wake(waker) {
                    entry.1 = waker.clone();
                }
                return Ok(());
            }
        }
    }
    *slot = None;
    let reactor = reactor()?;
    let (id, new_fd) = {
        let mut interests = lock(&reactor.interests);
        let id = interests.next_id;
        interests.next_id += 1;
        let list = interests.waiting.entry(fd).or_default();
        list.push((id, waker.clone()));
        (id, list.len() == 1)
    };
    if new_fd {
        // A full socket already holds a wake-up: nothing is lost when this write would block.
        let _ = (&reactor.notify).write(&[1]);
    }
    *slot = Some(Registration { reactor, fd, id });
    Ok(())
}
