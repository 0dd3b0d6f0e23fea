//! Review threads (GraphQL: REST has none): finding the thread an inline comment
//! starts, and resolving it.

use super::names::PrNumber;
use super::RepoClient;
use anyhow::Result;
use serde::de::IgnoredAny;
use serde::Deserialize;

/// A bound against endless paging of review threads: 5,000 on one pull request.
const MAX_THREAD_PAGES: usize = 50;

/// A review thread of a pull request (GraphQL).
pub(crate) struct ReviewThread {
    id: String,
    pub(crate) is_resolved: bool,
}

const REVIEW_THREADS: &str = "query($owner: String!, $name: String!, $number: Int!, $after: String) { repository(owner: $owner, name: $name) { pullRequest(number: $number) { reviewThreads(first: 100, after: $after) { pageInfo { hasNextPage endCursor } nodes { id isResolved comments(first: 1) { nodes { databaseId } } } } } } }";
const RESOLVE_REVIEW_THREAD: &str = "mutation($id: ID!) { resolveReviewThread(input: {threadId: $id}) { thread { id isResolved } } }";

#[derive(Deserialize)]
struct ThreadsData {
    repository: Option<ThreadsRepository>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadsRepository {
    pull_request: Option<ThreadsPullRequest>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadsPullRequest {
    review_threads: ThreadPage,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadPage {
    page_info: PageInfo,
    nodes: Vec<ThreadNode>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageInfo {
    has_next_page: bool,
    end_cursor: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadNode {
    id: String,
    is_resolved: bool,
    comments: ThreadComments,
}

#[derive(Deserialize)]
struct ThreadComments {
    nodes: Vec<ThreadComment>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThreadComment {
    database_id: Option<i64>,
}

impl RepoClient {
    /// The review thread that inline comment `comment_id` starts, if GitHub lists
    /// it (GraphQL: REST has no threads).
    pub(crate) async fn review_thread_starting_with(
        &self,
        pr: PrNumber,
        comment_id: i64,
    ) -> Result<Option<ReviewThread>> {
        let (owner, name) = self.repo().owner_and_name();
        let mut after: Option<String> = None;
        for _ in 0..MAX_THREAD_PAGES {
            let data: ThreadsData = self
                .graphql(
                    REVIEW_THREADS,
                    serde_json::json!({"owner": owner, "name": name, "number": pr, "after": after}),
                )
                .await?;
            let Some(page) = data
                .repository
                .and_then(|r| r.pull_request)
                .map(|p| p.review_threads)
            else {
                return Ok(None);
            };
            let found = page
                .nodes
                .into_iter()
                .find(|t| t.comments.nodes.first().and_then(|c| c.database_id) == Some(comment_id));
            if let Some(t) = found {
                return Ok(Some(ReviewThread {
                    id: t.id,
                    is_resolved: t.is_resolved,
                }));
            }
            match page.page_info.end_cursor {
                Some(cursor) if page.page_info.has_next_page => after = Some(cursor),
                _ => break,
            }
        }
        Ok(None)
    }

    pub(crate) async fn resolve_review_thread(&self, thread: &ReviewThread) -> Result<()> {
        self.graphql::<IgnoredAny>(RESOLVE_REVIEW_THREAD, serde_json::json!({"id": thread.id}))
            .await?;
        Ok(())
    }
}
