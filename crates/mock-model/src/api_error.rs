//! Scripted API errors ([`crate::Step::Error`], [`crate::Step::UsageLimit`]) in each dialect's
//! own shape, with the wait where each protocol puts it: Anthropic and `OpenAI` send a
//! `retry-after` header, Gemini a `google.rpc.RetryInfo` detail. A usage window is Gemini's daily
//! quota (a `google.rpc.QuotaFailure` on a per-day quota, which Gemini CLI does not retry), and
//! `OpenAI`'s `usage_limit_reached` with its reset as a Unix time (`resets_at`, what Codex reads).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;

use crate::http::Response;
use crate::record::Api;

/// The error response for `status`, saying the limit resets in `retry_after` seconds.
pub(crate) fn response(api: Api, status: u16, retry_after: Option<u64>) -> Response {
    let limited = status == 429;
    let mut response = match api {
        Api::Messages => {
            let kind = match status {
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            Response::error(status, kind, &format!("mock-model scripted error {status}"))
        }
        Api::Gemini => {
            let mut error = json!({
                "code": status,
                "message": format!("mock-model scripted error {status}"),
                "status": if limited { "RESOURCE_EXHAUSTED" } else { "UNAVAILABLE" },
            });
            if let Some(secs) = retry_after {
                error["details"] = json!([{
                    "@type": "type.googleapis.com/google.rpc.RetryInfo",
                    "retryDelay": format!("{secs}s"),
                }]);
            }
            Response::json(status, &json!({ "error": error }))
        }
        Api::Responses | Api::ChatCompletions => {
            let wait = retry_after.map(|secs| format!(" Please try again in {secs}s.")).unwrap_or_default();
            let error = json!({
                "type": if limited { "rate_limit_exceeded" } else { "server_error" },
                "code": if limited { "rate_limit_exceeded" } else { "server_error" },
                "message": format!("mock-model scripted error {status}.{wait}"),
            });
            Response::json(status, &json!({ "error": error }))
        }
    };
    if let Some(secs) = retry_after {
        response.headers.push(("retry-after", secs.to_string()));
    }
    response
}

/// The usage-window limit of `api`, resetting `resets_in` seconds from now.
pub(crate) fn usage_limit(api: Api, resets_in: u64) -> Response {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let message = "mock-model scripted usage limit";
    let mut response = match api {
        // Anthropic's subscription windows: a rate-limit error whose unified status is rejected,
        // its message ending in the reset as a Unix time, as Claude's usage-limit errors do.
        Api::Messages => {
            let said = format!("Claude AI usage limit reached|{}", now + resets_in);
            let mut response = Response::error(429, "rate_limit_error", &said);
            response.headers.push(("anthropic-ratelimit-unified-status", "rejected".into()));
            response.headers.push(("anthropic-ratelimit-unified-reset", (now + resets_in).to_string()));
            response
        }
        Api::Gemini => Response::json(
            429,
            &json!({"error": {
                "code": 429,
                "message": format!("{message}. Please retry in {resets_in}s."),
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                        "quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                        "quotaId": "GenerateRequestsPerDayPerProjectPerModel",
                    }]},
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{resets_in}s")},
                ],
            }}),
        ),
        Api::Responses | Api::ChatCompletions => Response::json(
            429,
            &json!({"error": {
                "type": "usage_limit_reached",
                "message": message,
                "resets_at": now + resets_in,
                "resets_in_seconds": resets_in,
            }}),
        ),
    };
    response.headers.push(("retry-after", resets_in.to_string()));
    response
}

/// The answer that the conversation no longer fits the model's context window, as each API says
/// it: an HTTP 400 the client does not retry.
pub(crate) fn prompt_too_long(api: Api) -> Response {
    let message = "prompt is too long: 1012345 tokens > 1000000 maximum";
    match api {
        Api::Messages => Response::error(400, "invalid_request_error", message),
        Api::Gemini => Response::json(
            400,
            &json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}),
        ),
        Api::Responses | Api::ChatCompletions => Response::json(
            400,
            &json!({"error": {"type": "invalid_request_error", "code": "context_length_exceeded", "message": message}}),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(response: &Response) -> serde_json::Value {
        serde_json::from_slice(&response.body).unwrap()
    }

    #[test]
    fn each_dialect_says_limit_and_wait_its_own_way() {
        let anthropic = response(Api::Messages, 429, Some(3));
        assert_eq!(anthropic.status, 429);
        assert_eq!(body(&anthropic)["error"]["type"], "rate_limit_error");
        assert!(anthropic.headers.contains(&("retry-after", "3".into())));
        let gemini = body(&response(Api::Gemini, 429, Some(3)));
        assert_eq!(gemini["error"]["status"], "RESOURCE_EXHAUSTED");
        assert_eq!(gemini["error"]["details"][0]["retryDelay"], "3s");
        let openai = body(&response(Api::Responses, 429, Some(3)));
        assert_eq!(openai["error"]["type"], "rate_limit_exceeded");
        assert!(openai["error"]["message"].as_str().unwrap().ends_with("Please try again in 3s."));
        let overloaded = response(Api::Messages, 529, None);
        assert_eq!(body(&overloaded)["error"]["type"], "overloaded_error");
        assert!(overloaded.headers.iter().all(|(name, _)| *name != "retry-after"));
    }

    #[test]
    fn usage_windows_are_each_apis_own_non_retried_limit() {
        let gemini = body(&usage_limit(Api::Gemini, 5));
        assert_eq!(gemini["error"]["code"], 429);
        let quota = &gemini["error"]["details"][0];
        assert_eq!(quota["@type"], "type.googleapis.com/google.rpc.QuotaFailure");
        assert!(quota["violations"][0]["quotaId"].as_str().unwrap().contains("PerDay"));
        let openai = usage_limit(Api::Responses, 5);
        assert_eq!(openai.status, 429);
        let openai = body(&openai);
        assert_eq!(openai["error"]["type"], "usage_limit_reached");
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let resets_at = openai["error"]["resets_at"].as_u64().unwrap();
        assert!((now + 4..=now + 6).contains(&resets_at), "{resets_at} vs {now}");
        let anthropic = usage_limit(Api::Messages, 5);
        assert!(anthropic.headers.contains(&("anthropic-ratelimit-unified-status", "rejected".into())));
        let said = body(&anthropic)["error"]["message"].as_str().unwrap().to_owned();
        let (_, reset) = said.split_once('|').unwrap();
        assert!((now + 4..=now + 6).contains(&reset.parse().unwrap()), "{said}");
    }

    #[test]
    fn a_prompt_too_long_is_a_400_that_says_so() {
        for api in [Api::Messages, Api::Gemini, Api::Responses] {
            let response = prompt_too_long(api);
            assert_eq!(response.status, 400);
            assert!(body(&response)["error"]["message"].as_str().unwrap().starts_with("prompt is too long"));
        }
        assert_eq!(body(&prompt_too_long(Api::Messages))["error"]["type"], "invalid_request_error");
    }
}
