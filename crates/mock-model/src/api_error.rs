//! Scripted API errors ([`crate::Step::Error`]) in each dialect's own shape, with the wait where
//! each protocol puts it: Anthropic and `OpenAI` send a `retry-after` header, Gemini a
//! `google.rpc.RetryInfo` detail. Codex reads a usage-window limit from the body's
//! `usage_limit_reached` error and its `resets_in_seconds`.

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
        Api::Responses => {
            let mut error = json!({
                "type": if limited { "usage_limit_reached" } else { "server_error" },
                "message": format!("mock-model scripted error {status}"),
            });
            if let Some(secs) = retry_after {
                error["resets_in_seconds"] = json!(secs);
            }
            Response::json(status, &json!({ "error": error }))
        }
    };
    if let Some(secs) = retry_after {
        response.headers.push(("retry-after", secs.to_string()));
    }
    response
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
        assert_eq!(openai["error"]["type"], "usage_limit_reached");
        assert_eq!(openai["error"]["resets_in_seconds"], 3);
        let overloaded = response(Api::Messages, 529, None);
        assert_eq!(body(&overloaded)["error"]["type"], "overloaded_error");
        assert!(overloaded.headers.iter().all(|(name, _)| *name != "retry-after"));
    }
}
