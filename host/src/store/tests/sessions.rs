//! The admin console's sessions signed out: seen by every handle (process, replica) at once,
//! and forgotten once their cookies would have expired.

use super::{Harness, seen_within};

pub(super) async fn a_sign_out_is_seen_by_every_handle_and_kept_until_the_cookie_expires(
    h: &Harness,
) {
    let (first, second) = (h.open().await, h.open().await);
    first.wait_until_listening().await;
    let now = crate::clock::now_ms();
    let (session, other) = ([1; 32], [2; 32]);
    for store in [&first, &second] {
        assert!(!store.session_signed_out(&session).await.unwrap());
        assert!(!store.session_signed_out(&other).await.unwrap());
    }
    // Both cached as live now: the sign-out must reach them anyway.
    second
        .sign_out_session(&session, now + 60_000)
        .await
        .unwrap();
    assert!(second.session_signed_out(&session).await.unwrap());
    let took = seen_within(h.propagation(), "the sign-out", || async {
        first.session_signed_out(&session).await.unwrap()
    })
    .await;
    eprintln!("the other handle refused the session after {took:?}");
    assert!(!first.session_signed_out(&other).await.unwrap());
    // Twice is once.
    first
        .sign_out_session(&session, now + 60_000)
        .await
        .unwrap();
    assert_eq!(h.count("SELECT count(*) FROM console_signouts").await, 1);

    // A cookie that expired needs no row: the next sign-out forgets it.
    h.execute("UPDATE console_signouts SET expires_at = 1")
        .await;
    first.sign_out_session(&other, now + 60_000).await.unwrap();
    assert_eq!(h.count("SELECT count(*) FROM console_signouts").await, 1);
    assert!(first.session_signed_out(&other).await.unwrap());
}
