use proptest::prelude::*;

use super::*;

fn request(settings: &str, input: Input) -> CheckedRequest {
    CheckedRequest {
        guard: "pii".into(),
        settings: settings.into(),
        route: "openai".into(),
        model: "gpt".into(),
        input,
        functions: Vec::new(),
        params: "{}".into(),
    }
}

fn text(text: &str) -> Input {
    Input::Prompt(Prompt::Text(text.into()))
}

/// `text` redacted with the default settings, and the changes counted.
fn redacted(text: &str) -> (String, Vec<(String, u32)>) {
    let policy = Policy {
        mode: Mode::Redact,
        kinds: Kinds::ALL,
        placeholder: None,
    };
    let mut text = text.to_owned();
    let mut changes = Changes::new();
    policy.redact(&mut text, &mut changes);
    let changes = changes.iter().map(|c| (c.kind.clone(), c.count)).collect();
    (text, changes)
}

fn counts(list: &[(&str, u32)]) -> Vec<(String, u32)> {
    list.iter().map(|&(k, n)| (k.to_owned(), n)).collect()
}

fn answer(texts: &[&str]) -> Completion {
    Completion {
        model: "gpt".into(),
        choices: (texts.iter().enumerate())
            .map(|(index, text)| Choice {
                index: index as u32,
                text: (*text).into(),
                reasoning: Vec::new(),
                finish_reason: Some(FinishReason::Stop),
                function_call: None,
                tool_calls: Vec::new(),
                logprobs: None,
            })
            .collect(),
        usage: None,
    }
}

#[test]
fn each_kind_is_found_and_redacted() {
    for (input, output, kind) in [
        ("mail jane.doe@example.com now", "mail [EMAIL] now", "email"),
        ("call +1 (555) 123-4567.", "call [PHONE].", "phone"),
        ("call 020 7946 0958", "call [PHONE]", "phone"),
        (
            "card 4111 1111 1111 1111 exp 12/27",
            "card [CARD] exp 12/27",
            "card",
        ),
        ("IBAN DE89 3704 0044 0532 0130 00.", "IBAN [IBAN].", "iban"),
        ("from 192.168.0.12:443", "from [IP]:443", "ip"),
        ("from [2001:db8::7]:443", "from [[IP]]:443", "ip"),
        ("key=AKIAIOSFODNN7EXAMPLE", "key=[SECRET]", "secret"),
        (
            "token ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "token [SECRET]",
            "secret",
        ),
        (
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "Authorization: Bearer [SECRET]",
            "secret",
        ),
        (
            "key:\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg\n-----END EC PRIVATE KEY-----\nthanks",
            "key:\n[SECRET]\nthanks",
            "secret",
        ),
    ] {
        assert_eq!(
            redacted(input),
            (output.to_owned(), counts(&[(kind, 1)])),
            "{input}"
        );
    }
}

#[test]
fn counts_by_kind() {
    let (text, changes) =
        redacted("a@x.com, b@y.org; card 5555-5555-5555-4444; a@x.com again from 10.0.0.1");
    assert_eq!(
        text,
        "[EMAIL], [EMAIL]; card [CARD]; [EMAIL] again from [IP]"
    );
    assert_eq!(changes, counts(&[("email", 3), ("card", 1), ("ip", 1)]));
}

#[test]
fn matches_side_by_side() {
    let (text, _) = redacted("a@x.com b@y.org,10.0.0.1 AKIAIOSFODNN7EXAMPLE");
    assert_eq!(text, "[EMAIL] [EMAIL],[IP] [SECRET]");
    // A word right after a match is not the start of one.
    let (text, _) = redacted("x@y.com_AKIAIOSFODNN7EXAMPLE");
    assert_eq!(text, "x@y.com_AKIAIOSFODNN7EXAMPLE");
}

#[test]
fn invalid_numbers_are_left_alone() {
    for text in [
        // Luhn check digit wrong.
        "card 4111 1111 1111 1112",
        "card 5555555555554445",
        // mod-97 check digits wrong.
        "IBAN DE88 3704 0044 0532 0130 00",
        "IBAN GB82WEST12345698765433",
        // Octets out of range.
        "host 300.1.2.3",
        "host 10.0.0.256",
    ] {
        assert_eq!(redacted(text), (text.to_owned(), Vec::new()), "{text}");
    }
}

#[test]
fn no_false_positives() {
    for text in [
        // Dates and times.
        "On 2024-01-15 at 10:30:00 we met; 15/01/2024, 01.02.2024, 2024/01/15 12:00.",
        "timestamp 2024-01-15T10:30:00.123Z or 1705314600 or 1705314600123",
        // Version numbers.
        "version 1.2.3, v10.0.1.2, 1.2.3.4.5, release 2.14.0-rc.1, python3.12",
        // Order and tracking ids.
        "order #123456789, ORD-2024-000123, invoice 4711-0815, id 12345678901234567890",
        "uuid 550e8400-e29b-41d4-a716-446655440000 and sha 9f86d081884c7d659a2feaa0c55ad015",
        // Prices and amounts.
        "$1,234.56, €1.234,56, 1 234 567,89 EUR, 12 345 678 901 units, 3.14159 2.71828",
        // Short numbers and plain counts.
        "room 101, call 911, pin 1234, zip 90210, 5551234567 units",
        // Code.
        "use std::collections::HashMap; a[1::2]; a[::-1]; x = y @ z; @decorator",
        "sk-learn is not a key; AKIA alone; ghp_ alone; the 10:30 train",
        "MAC 00:1A:2B:3C:4D:5E, css #ff0000, hex 0xDEADBEEF",
        "user@localhost, @handle, price@5.00",
    ] {
        assert_eq!(redacted(text), (text.to_owned(), Vec::new()), "{text}");
    }
}

#[test]
fn multibyte_text_around_matches() {
    let (text, changes) = redacted("Grüße — schreib an jörg@exämple.de oder ☎ +49 30 1234567 🙂");
    assert_eq!(text, "Grüße — schreib an [EMAIL] oder ☎ [PHONE] 🙂");
    assert_eq!(changes, counts(&[("email", 1), ("phone", 1)]));
    let (text, _) = redacted("メールはuser@example.comまで、IPは10.0.0.1です");
    assert_eq!(text, "メールは[EMAIL]まで、IPは[IP]です");
    let (text, _) = redacted("qty 2 4111 1111 1111 1111");
    assert_eq!(text, "qty 2 [CARD]");
    let (text, _) = redacted("日本4111111111111111円");
    assert_eq!(text, "日本[CARD]円");
}

#[test]
fn nothing_found_is_not_copied() {
    let policy = Policy {
        mode: Mode::Redact,
        kinds: Kinds::ALL,
        placeholder: None,
    };
    let mut text = String::from("nothing to see here, 2024-01-15");
    let before = text.as_ptr();
    let mut changes = Changes::new();
    policy.redact(&mut text, &mut changes);
    assert_eq!(text.as_ptr(), before);
    assert!(changes.is_empty());
}

#[test]
fn redacts_every_text_of_a_request() {
    let mut tool = Message::text_message(Role::Tool, "the user's email is a@example.com");
    tool.tool_call_id = Some("call_1".into());
    let user = Message {
        parts: vec![
            Part::Text("card 4111111111111111".into()),
            Part::Text("and ok".into()),
        ],
        ..Message::text_message(Role::User, "")
    };
    let input = Input::Prompt(Prompt::Chat(vec![
        Message::text_message(Role::System, "be kind"),
        user,
        tool,
    ]));
    let verdict = PiiGuard::check_request(request("{}", input));
    let RequestVerdict::Rewrite(rewrite) = verdict else {
        panic!("{verdict:?}");
    };
    let texts: Vec<&str> = rewrite.input.texts().collect();
    assert_eq!(
        texts,
        [
            "be kind",
            "card [CARD]",
            "and ok",
            "the user's email is [EMAIL]"
        ]
    );
    let changes: Vec<(&str, u32)> = (rewrite.changes.iter())
        .map(|c| (c.kind.as_str(), c.count))
        .collect();
    assert_eq!(changes, [("card", 1), ("email", 1)]);

    let embedding = Input::Embedding(vec!["x@y.io".into(), "plain".into()]);
    assert_eq!(
        PiiGuard::check_request(request("", embedding)),
        RequestVerdict::Rewrite(RequestRewrite {
            input: Input::Embedding(vec!["[EMAIL]".into(), "plain".into()]),
            changes: vec![Change {
                kind: "email".into(),
                count: 1
            }],
        })
    );
}

fn chat(messages: Vec<Message>) -> Input {
    Input::Prompt(Prompt::Chat(messages))
}

fn user(parts: &[&str]) -> Message {
    Message {
        parts: parts.iter().map(|&text| Part::Text(text.into())).collect(),
        ..Message::text_message(Role::User, "")
    }
}

/// The texts of a chat's messages after the default redaction, one list a
/// message, and the changes counted.
fn chat_redacted(messages: Vec<Message>) -> (Vec<Vec<String>>, Vec<(String, u32)>) {
    let input = chat(messages.clone());
    let (input, changes) = match PiiGuard::check_request(request("{}", input)) {
        RequestVerdict::Rewrite(rewrite) => (rewrite.input, rewrite.changes),
        RequestVerdict::Allow => (chat(messages), Vec::new()),
        other => panic!("{other:?}"),
    };
    let Input::Prompt(Prompt::Chat(messages)) = input else {
        panic!("{input:?}");
    };
    let texts = (messages.iter())
        .map(|m| {
            (m.parts.iter())
                .filter_map(|p| match p {
                    Part::Text(text) => Some(text.clone()),
                    _ => None,
                })
                .collect()
        })
        .collect();
    let changes = changes.into_iter().map(|c| (c.kind, c.count)).collect();
    (texts, changes)
}

fn strings(texts: &[&[&str]]) -> Vec<Vec<String>> {
    (texts.iter())
        .map(|t| t.iter().map(|&s| s.to_owned()).collect())
        .collect()
}

#[test]
fn an_address_or_number_split_across_messages_is_found() {
    for (messages, redacted, kind) in [
        (
            &[&["my email is jane.doe@exa"][..], &["mple.com, thanks"]][..],
            &[&["my email is [EMAIL]"][..], &["[EMAIL], thanks"]][..],
            "email",
        ),
        (
            &[&["write to jane.doe"], &["@example.com"]],
            &[&["write to [EMAIL]"], &["[EMAIL]"]],
            "email",
        ),
        (
            &[&["card 4111 1111 "], &["1111 1111 exp 12/27"]],
            &[&["card [CARD]"], &["[CARD] exp 12/27"]],
            "card",
        ),
        (
            &[&["card 41111111"], &["11111111"]],
            &[&["card [CARD]"], &["[CARD]"]],
            "card",
        ),
        // Cut in three, the middle message a piece of the domain alone.
        (
            &[&["jane@"], &["exa"], &["mple.com"]],
            &[&["[EMAIL]"], &["[EMAIL]"], &["[EMAIL]"]],
            "email",
        ),
        (
            &[&["key AKIAIOSFOD"], &["NN7EXAMPLE ok"]],
            &[&["key [SECRET]"], &["[SECRET] ok"]],
            "secret",
        ),
    ] {
        let messages: Vec<Message> = messages.iter().map(|parts| user(parts)).collect();
        assert_eq!(
            chat_redacted(messages.clone()),
            (strings(redacted), counts(&[(kind, 1)])),
            "{messages:?}"
        );
    }
}

#[test]
fn a_number_in_groups_cut_between_two_groups_is_found() {
    for (messages, redacted, kind) in [
        (
            &[&["card 4111 1111"][..], &["1111 1111 ok"]][..],
            &[&["card [CARD]"][..], &["[CARD] ok"]][..],
            "card",
        ),
        (
            &[&["card 4111-1111-1111"], &["1111"]],
            &[&["card [CARD]"], &["[CARD]"]],
            "card",
        ),
        (
            &[&["card 4111"], &["1111 1111 1111 ok"]],
            &[&["card [CARD]"], &["[CARD] ok"]],
            "card",
        ),
        (
            &[&["call +44 20"], &["7946 0958"]],
            &[&["call [PHONE]"], &["[PHONE]"]],
            "phone",
        ),
        (
            &[&["iban DE89 3704"], &["0044 0532 0130 00"]],
            &[&["iban [IBAN]"], &["[IBAN]"]],
            "iban",
        ),
    ] {
        let messages: Vec<Message> = messages.iter().map(|parts| user(parts)).collect();
        assert_eq!(
            chat_redacted(messages.clone()),
            (strings(redacted), counts(&[(kind, 1)])),
            "{messages:?}"
        );
    }
    // Numbers that only touch are left alone.
    for messages in [
        &[&["total 12"][..], &["34 items"]][..],
        &[&["in 2024"], &["15 people came"]],
        &[&["rooms 101 102"], &["103 104"]],
        // Cut inside a group, a dotted number is not read with a dot.
        &[&["version 2.1"], &["4.0 is out"]],
        &[&["see 10.0.0"], &["1 and on"]],
    ] {
        let messages: Vec<Message> = messages.iter().map(|parts| user(parts)).collect();
        let (texts, changes) = chat_redacted(messages.clone());
        assert!(changes.is_empty(), "{messages:?}: {texts:?}");
    }
}

#[test]
fn an_address_split_across_parts_of_a_message_is_found() {
    let (texts, changes) = chat_redacted(vec![user(&["mail jane.doe@example", ".com today"])]);
    assert_eq!(texts, strings(&[&["mail [EMAIL]", "[EMAIL] today"]]));
    assert_eq!(changes, counts(&[("email", 1)]));
    // Across a part that is not text (an image), as the model reads them.
    let mut message = user(&["phone +44 20 ", "7946 0958"]);
    message.parts.insert(
        1,
        Part::Image(gateway_plugin_sdk::Image {
            source: gateway_plugin_sdk::Source::Url("https://x/y.png".into()),
            media_type: None,
            detail: None,
        }),
    );
    let (texts, changes) = chat_redacted(vec![message]);
    assert_eq!(texts, strings(&[&["phone [PHONE]", "[PHONE]"]]));
    assert_eq!(changes, counts(&[("phone", 1)]));
    // Deny mode reads across them too.
    let input = chat(vec![user(&["jane.doe@exa"]), user(&["mple.com"])]);
    assert_eq!(
        PiiGuard::check_request(request(r#"{"mode": "deny"}"#, input)),
        RequestVerdict::Deny("the request contains an email address".into())
    );
}

#[test]
fn joining_texts_neither_hides_nor_invents_findings() {
    for messages in [
        &[&["hello"][..], &["world"]][..],
        &[&["total 12"], &["34 items"]],
        &[&["version 1.2"], &[".3 is out"]],
        &[&["jane"], &["doe"]],
        &[&["41111111"], &["1111111"]],
    ] {
        let messages: Vec<Message> = messages.iter().map(|parts| user(parts)).collect();
        let (texts, changes) = chat_redacted(messages.clone());
        assert!(changes.is_empty(), "{messages:?}: {texts:?}");
    }
    // A digit at the start of the next message does not hide the card
    // before it (read joined, it is a longer number).
    let (texts, _) = chat_redacted(vec![user(&["card 4111 1111 1111 1111"]), user(&["2 more"])]);
    assert_eq!(texts, strings(&[&["card [CARD]"], &["2 more"]]));
    let (texts, _) = chat_redacted(vec![user(&["4111111111111111"]), user(&["5"])]);
    assert_eq!(texts, strings(&[&["[CARD]"], &["5"]]));
    // An address whole in one message, its first letters touching the
    // message before: the word before is replaced too, nothing is left.
    let (texts, changes) = chat_redacted(vec![user(&["write to"]), user(&["a@example.com"])]);
    assert_eq!(texts, strings(&[&["write [EMAIL]"], &["[EMAIL]"]]));
    assert_eq!(changes, counts(&[("email", 1)]));
}

#[test]
fn fullwidth_at_signs_and_digits_are_found() {
    for (input, output, kind) in [
        (
            "mail jane.doe＠example.com now",
            "mail [EMAIL] now",
            "email",
        ),
        (
            "mail jane.doe﹫example.com now",
            "mail [EMAIL] now",
            "email",
        ),
        (
            "mail ｊａｎｅ＠ｅｘａｍｐｌｅ．ｃｏｍ now",
            "mail [EMAIL] now",
            "email",
        ),
        (
            "card ４１１１ １１１１ １１１１ １１１１ ok",
            "card [CARD] ok",
            "card",
        ),
        (
            "card ４１１１１１１１１１１１１１１１ ok",
            "card [CARD] ok",
            "card",
        ),
        (
            "call ＋４４ ２０ ７９４６ ０９５８ ok",
            "call [PHONE] ok",
            "phone",
        ),
        ("host １９２．１６８．０．１２ ok", "host [IP] ok", "ip"),
    ] {
        assert_eq!(
            redacted(input),
            (output.to_owned(), counts(&[(kind, 1)])),
            "{input}"
        );
    }
}

#[test]
fn zero_width_characters_and_soft_hyphens_inside_an_address_are_found() {
    for input in [
        "mail jane@exa\u{200B}mple.com now",
        "mail jane@exam\u{AD}ple.com now",
        "mail jane@example\u{2060}.com now",
        "mail ja\u{200C}ne@example.\u{FEFF}com now",
        "mail jane\u{200D}@\u{200B}example.com now",
    ] {
        assert_eq!(
            redacted(input),
            ("mail [EMAIL] now".to_owned(), counts(&[("email", 1)])),
            "{input:?}"
        );
    }
    let (text, _) = redacted("card 4111\u{AD}1111\u{200B}1111\u{AD}1111 ok");
    assert_eq!(text, "card [CARD] ok");
    // Skipped before a finding, left before its placeholder.
    let (text, _) = redacted("\u{200B}(0@example.com");
    assert_eq!(text, "\u{200B}([EMAIL]");
}

#[test]
fn card_digits_split_by_no_break_spaces_or_dots_are_found() {
    for input in [
        "card 4111\u{A0}1111\u{A0}1111\u{A0}1111 ok",
        "card 4111\u{202F}1111\u{202F}1111\u{202F}1111 ok",
        "card 4111\u{2009}1111\u{2009}1111\u{2009}1111 ok",
        "card 4111.1111.1111.1111 ok",
        "card 3782.822463.10005 ok",
    ] {
        assert_eq!(
            redacted(input),
            ("card [CARD] ok".to_owned(), counts(&[("card", 1)])),
            "{input:?}"
        );
    }
    for text in [
        "card 4111.1111.1111.1112",
        "version 4111.1111.1111.1111.5",
        "255.255.255.255.255",
    ] {
        assert!(
            redacted(text).1.iter().all(|(kind, _)| kind != "card"),
            "{text}"
        );
    }
}

#[test]
fn only_the_finding_is_replaced_the_rest_keeps_its_characters() {
    let text = "ﬁle №5 for ＡＢＣ\u{A0}co\u{200B}rp: jane＠exa\u{AD}mple.com, e\u{301}te\u{301} ①";
    let (out, changes) = redacted(text);
    assert_eq!(
        out,
        "ﬁle №5 for ＡＢＣ\u{A0}co\u{200B}rp: [EMAIL], e\u{301}te\u{301} ①"
    );
    assert_eq!(changes, counts(&[("email", 1)]));
}

#[test]
fn the_authors_name_of_a_message_is_scanned() {
    let mut named = Message::text_message(Role::User, "hello");
    named.name = Some("jane.doe@example.com".into());
    let mut function = Message::text_message(Role::Tool, "42");
    function.tool_call_id = Some("call_1".into());
    function.name = Some("lookup_10.0.0.1".into());
    let input = chat(vec![named.clone(), function.clone()]);
    let RequestVerdict::Rewrite(rewrite) = PiiGuard::check_request(request("{}", input)) else {
        panic!("no rewrite");
    };
    let Input::Prompt(Prompt::Chat(messages)) = &rewrite.input else {
        panic!("{:?}", rewrite.input);
    };
    assert_eq!(messages[0].name.as_deref(), Some("[EMAIL]"));
    assert_eq!(messages[0].parts, vec![Part::Text("hello".into())]);
    // A tool's name is the function's, matched with its call: left as is.
    assert_eq!(messages[1].name.as_deref(), Some("lookup_10.0.0.1"));
    assert_eq!(
        rewrite.changes,
        vec![Change {
            kind: "email".into(),
            count: 1
        }]
    );
    // Read on its own, not joined to the messages' texts.
    let mut name_only = Message::text_message(Role::User, "@example.com");
    name_only.name = Some("jane".into());
    assert_eq!(
        PiiGuard::check_request(request("{}", chat(vec![name_only]))),
        RequestVerdict::Allow
    );
    let settings = r#"{"mode": "deny"}"#;
    assert_eq!(
        PiiGuard::check_request(request(settings, chat(vec![named]))),
        RequestVerdict::Deny("the request contains an email address".into())
    );
    assert_eq!(
        PiiGuard::check_request(request(settings, chat(vec![function]))),
        RequestVerdict::Allow
    );
}

#[test]
fn embedding_inputs_are_read_each_on_its_own() {
    let input = Input::Embedding(vec!["jane.doe@exa".into(), "mple.com".into()]);
    assert_eq!(
        PiiGuard::check_request(request("{}", input)),
        RequestVerdict::Allow
    );
}

#[test]
fn clean_request_is_allowed_not_rewritten() {
    let verdict = PiiGuard::check_request(request(r#"{"mode": "redact"}"#, text("hello")));
    assert_eq!(verdict, RequestVerdict::Allow);
    let verdict = PiiGuard::check_response(request("{}", text("hello")), answer(&["hi", ""]));
    assert_eq!(verdict, AnswerVerdict::Allow);
}

#[test]
fn redacts_every_choice_of_an_answer() {
    let verdict = PiiGuard::check_response(
        request("{}", text("q")),
        answer(&["reach me at 10.1.2.3", "nothing", "x@y.io or z@y.io"]),
    );
    assert_eq!(
        verdict,
        AnswerVerdict::Rewrite(AnswerRewrite {
            texts: vec![
                "reach me at [IP]".into(),
                "nothing".into(),
                "[EMAIL] or [EMAIL]".into()
            ],
            // In the order first found.
            changes: vec![
                Change {
                    kind: "ip".into(),
                    count: 1
                },
                Change {
                    kind: "email".into(),
                    count: 2
                },
            ],
        })
    );
}

#[test]
fn deny_names_the_kinds_never_the_values() {
    let settings = r#"{"mode": "deny"}"#;
    let input = text("mail a@example.com, card 4111 1111 1111 1111");
    assert_eq!(
        PiiGuard::check_request(request(settings, input)),
        RequestVerdict::Deny(
            "the request contains an email address and a payment card number".into()
        )
    );
    let input = text("key AKIAIOSFODNN7EXAMPLE from 10.0.0.1, call 555-123-4567");
    assert_eq!(
        PiiGuard::check_request(request(settings, input)),
        RequestVerdict::Deny(
            "the request contains a phone number, an IP address and a secret key or token".into()
        )
    );
    assert_eq!(
        PiiGuard::check_response(
            request(settings, text("q")),
            answer(&["ok", "DE89370400440532013000"])
        ),
        AnswerVerdict::Deny("the answer contains an IBAN".into())
    );
    assert_eq!(
        PiiGuard::check_request(request(settings, text("nothing here"))),
        RequestVerdict::Allow
    );
}

#[test]
fn kinds_and_placeholder_settings() {
    let settings = r#"{"kinds": ["email"], "placeholder": "<{kind}:{KIND}>"}"#;
    let input = text("a@example.com from 10.0.0.1");
    let RequestVerdict::Rewrite(rewrite) = PiiGuard::check_request(request(settings, input)) else {
        panic!("no rewrite");
    };
    assert_eq!(rewrite.input, text("<email:EMAIL> from 10.0.0.1"));
    let settings = r#"{"mode": "deny", "kinds": ["card"]}"#;
    assert_eq!(
        PiiGuard::check_request(request(settings, text("a@example.com"))),
        RequestVerdict::Allow
    );
}

#[test]
fn bad_settings_fail_closed_naming_the_setting() {
    for (settings, message) in [
        (
            r#"{"mode": "block"}"#,
            "guard `pii`: setting `mode`: unknown variant `block`",
        ),
        (
            r#"{"kinds": ["emial"]}"#,
            "guard `pii`: setting `kinds[0]`: unknown variant `emial`",
        ),
        (r#"{"kinds": []}"#, "guard `pii`: setting `kinds` is empty"),
        (
            r#"{"mdoe": "deny"}"#,
            "guard `pii`: setting `mdoe`: unknown field `mdoe`",
        ),
    ] {
        let result =
            std::panic::catch_unwind(|| PiiGuard::check_request(request(settings, text("x"))));
        let panic = result.expect_err(settings);
        let message_of = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(message_of.starts_with(message), "{settings}: {message_of}");
    }
}

#[test]
fn info_names_the_plugin() {
    let info = PiiGuard::info();
    assert_eq!(info.name, "pii-guard");
    assert!(info.models.is_empty());
}

/// Characters that start or continue what the scanners look for, and some
/// that end them, of one to four bytes.
const ALPHABET: &[char] = &[
    '0', '1', '2', '4', '5', '9', 'a', 'e', 'f', 'k', 'x', 'y', 'A', 'D', 'E', 'I', 'K', 'S', 'J',
    '@', '.', '-', '_', '+', '(', ')', ':', ' ', '/', '[', ']', '\n', 'é', 'ü', 'ß', '×', '日',
    '🙂', '＠', '４', '\u{A0}', '\u{200B}', '\u{AD}', '\u{301}', 'ﬃ', '①', '．', '\u{1160}',
];

fn tricky_text() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        prop::sample::select(ALPHABET).prop_map(String::from),
        any::<char>().prop_map(String::from),
        prop::sample::select(
            &[
                "AKIA",
                "sk-",
                "ghp_",
                "xoxb-",
                "AIza",
                "eyJ",
                "-----BEGIN ",
                "PRIVATE KEY-----",
                "-----END ",
                "::",
                "4111",
                "DE89",
                "+44 ",
                "(555) ",
                "@example.com",
                "10.0.0.",
            ][..]
        )
        .prop_map(String::from),
    ];
    prop::collection::vec(pieces, 0..80).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any text scans without panicking, into ordered, disjoint matches on
    /// character boundaries, and redacts to valid text.
    #[test]
    fn scanning_never_panics(text in tricky_text()) {
        let mut last = 0;
        for found in Scanner::new(&text, Kinds::ALL) {
            prop_assert!(found.start >= last && found.start < found.end && found.end <= text.len());
            prop_assert!(text.is_char_boundary(found.start) && text.is_char_boundary(found.end));
            last = found.end;
        }
        let (out, _) = redacted(&text);
        prop_assert!(out.len() <= text.len() + 8 * text.len());
    }

    /// Texts read as one redact without panicking, and are left as they
    /// were when nothing is found.
    #[test]
    fn runs_never_panic(texts in prop::collection::vec(tricky_text(), 1..5)) {
        let policy = Policy {
            mode: Mode::Redact,
            kinds: Kinds::ALL,
            placeholder: None,
        };
        let mut out = texts.clone();
        let mut run: Vec<&mut String> = out.iter_mut().collect();
        let mut changes = Changes::new();
        policy.redact_run(&mut run, &mut changes);
        if changes.is_empty() {
            prop_assert_eq!(out, texts);
        }
    }
}

#[test]
#[ignore]
fn speed() {
    let prose = "You are a helpful assistant. Summarise the following conversation between a \
        customer and our support team, keeping the tone neutral and listing any follow-up actions \
        that were promised, who owns them and by when they are due. ";
    let numbers = "The quarterly report for 2024-01-15 shows revenue of $1,234.56 per unit, \
        up 3.5% from version 2.14.0; see ticket ORD-2024-000123 and the notes of the meeting at \
        10:30:00 with the team (room 101). Deploy with `std::collections::HashMap` as before. ";
    // Text that normalising changes: German with its `ß`, fullwidth and
    // no-break characters, a soft hyphen, Japanese.
    let unicode = "Grüße aus Köln: die Ｒｅｃｈｎｕｎｇ Nr.\u{A0}４７１１ ist be\u{AD}zahlt. \
        お問い合わせはサポートまでどうぞ。次回の打ち合わせは来週です。 ";
    // The same, already as NFKC reads it.
    let unicode_nfkc = "Grüße aus Köln: die Rechnung Nr. 4711 ist bezahlt. \
        お問い合わせはサポートまでどうぞ。次回の打ち合わせは来週です。 ";
    let paragraph = match std::env::var("PII_TEXT").as_deref() {
        Ok("prose") => prose,
        Ok("unicode") => unicode,
        Ok("unicode-nfkc") => unicode_nfkc,
        _ => numbers,
    };
    let text = paragraph.repeat(10_000 / paragraph.len() + 1);
    // The text cut into this many messages (at character boundaries), read
    // as one run.
    let parts: usize = std::env::var("PII_PARTS").map_or(1, |n| n.parse().unwrap());
    let mut pieces: Vec<String> = Vec::new();
    let mut rest = text.as_str();
    for n in (1..=parts).rev() {
        let mut cut = rest.len() / n;
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (piece, after) = rest.split_at(cut);
        pieces.push(piece.to_owned());
        rest = after;
    }
    let policy = Policy {
        mode: Mode::Redact,
        kinds: Kinds::ALL,
        placeholder: None,
    };
    let start = std::time::Instant::now();
    let rounds = std::env::var("PII_ROUNDS").map_or(2000, |n| n.parse().unwrap());
    for _ in 0..rounds {
        let mut texts = pieces.clone();
        let mut run: Vec<&mut String> = texts.iter_mut().collect();
        let mut changes = Changes::new();
        policy.redact_run(&mut run, &mut changes);
        assert!(changes.is_empty());
    }
    let per = start.elapsed() / rounds;
    eprintln!(
        "{} bytes in {parts} texts: {per:?} per scan ({:.2} ns/byte)",
        text.len(),
        per.as_nanos() as f64 / text.len() as f64
    );
}

#[test]
#[ignore]
fn adversarial_speed() {
    let policy = Policy {
        mode: Mode::Redact,
        kinds: Kinds::ALL,
        placeholder: None,
    };
    for piece in [
        "sk-",
        "eyJ-",
        "eyJa.eyJ-",
        "a.",
        "1 ",
        "0-",
        "::",
        "1:",
        "a@",
        "aaaaaaaaaa@",
        "-----BEGIN ",
        "DE89 ",
        "4111 ",
        "+1 ",
        "(0)",
        "ghp_",
        "xoxb-1",
        "AKIA",
        "github_pat_",
        "sk_live_",
        "AIza",
        "2001:db8:",
        "1.1.",
        "0 1",
        "1 2 3 4 5 6 7 8 9 ",
        "jörg@",
    ] {
        if std::env::var("PII_PIECE").is_ok_and(|only| only != piece) {
            continue;
        }
        let text = piece.repeat(200_000 / piece.len());
        let start = std::time::Instant::now();
        let mut t = text.clone();
        policy.redact(&mut t, &mut Changes::new());
        eprintln!(
            "{piece:?} x {}: {:?}",
            text.len() / piece.len(),
            start.elapsed()
        );
    }
}
