// The action's comment step, run by actions/github-script: post the plan
// (file) as a pull-request comment, replacing the plan comments of earlier
// pushes. berth splits a plan longer than GitHub's 65,535 characters into
// parts, one comment each.
module.exports = async ({ github, context, file }) => {
  const fs = require('fs');
  const parts = fs.readFileSync(file, 'utf8').split('\n<!-- berth plan: next comment -->\n');
  const marker = '<!-- berth plan comment -->';
  const { owner, repo } = context.repo;
  const issue_number = context.issue.number;
  const old = await github.paginate(github.rest.issues.listComments, { owner, repo, issue_number });
  for (const c of old) {
    if (c.body && c.body.includes(marker)) {
      await github.rest.issues.deleteComment({ owner, repo, comment_id: c.id });
    }
  }
  for (const part of parts) {
    await github.rest.issues.createComment({ owner, repo, issue_number, body: marker + '\n' + part });
  }
  return parts.length;
};
