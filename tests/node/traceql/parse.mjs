// Parses TraceQL with Grafana's own grammar (@grafana/lezer-traceql, the parser Grafana's query
// editor uses) for tests/test_traceql_grammar.py. Reads a JSON array of query strings on stdin and
// writes one JSON array back: for each query, `error` (the offset of the first syntax error, or null)
// and `tree` (the syntax tree as nested [name, from, to, children] lists, so the Python side can
// evaluate the queries it understands on the same parse).
import { parser } from '@grafana/lezer-traceql';

function toTree(node) {
  const children = [];
  for (let child = node.firstChild; child; child = child.nextSibling) children.push(toTree(child));
  return [node.type.isError ? 'ERROR' : node.name, node.from, node.to, children];
}

let input = '';
process.stdin.setEncoding('utf8');
for await (const chunk of process.stdin) input += chunk;
const answers = JSON.parse(input).map((query) => {
  const tree = parser.parse(query);
  let error = null;
  tree.iterate({
    enter(node) {
      if (node.type.isError && error === null) error = node.from;
    },
  });
  return { error, tree: toTree(tree.topNode) };
});
process.stdout.write(JSON.stringify(answers));
