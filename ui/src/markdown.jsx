// A model's markdown as React elements, safe by construction: the text is parsed to a syntax
// tree (mdast, with GitHub's tables, strikethrough and autolinks) and every node becomes an
// element made here with its text as a React text child. Nothing is ever handed to the
// browser's HTML parser (React's raw-HTML escape hatch is never used): HTML in the answer (`<script>`,
// `<img onerror=…>`) is shown as the characters it is, and a link or image opens only if it is
// http(s) (`SafeLink`). Images are shown as links, so an answer cannot make the page load anything.
import { fromMarkdown } from 'mdast-util-from-markdown';
import { gfmFromMarkdown } from 'mdast-util-gfm';
import { gfm } from 'micromark-extension-gfm';
import { SafeLink } from './links.jsx';

const BLOCK = {
  paragraph: 'p',
  blockquote: 'blockquote',
  listItem: 'li',
  emphasis: 'em',
  strong: 'strong',
  delete: 'del',
  thematicBreak: 'hr',
  break: 'br',
};

function Node({ node }) {
  const kids = () => (node.children || []).map((child, i) => <Node key={i} node={child} />);
  switch (node.type) {
    case 'text':
    case 'html': // raw HTML from the model: its characters, never markup
      return node.value;
    case 'inlineCode':
      return <code>{node.value}</code>;
    case 'code':
      return (
        <pre className="code" data-lang={node.lang || undefined}>
          <code>{node.value}</code>
        </pre>
      );
    case 'heading': {
      // Below the page's own headings: an answer's h1 is the page's h3.
      const Tag = `h${Math.min(6, node.depth + 2)}`;
      return <Tag>{kids()}</Tag>;
    }
    case 'list': {
      const start = node.ordered && node.start !== 1 ? node.start : undefined;
      return node.ordered ? <ol start={start}>{kids()}</ol> : <ul>{kids()}</ul>;
    }
    case 'table': {
      const [head, ...rows] = node.children; // the first row is the header
      const cells = (row, Cell) =>
        row.children.map((cell, i) => (
          <Cell key={i}>
            {(cell.children || []).map((c, j) => (
              <Node key={j} node={c} />
            ))}
          </Cell>
        ));
      return (
        <table>
          <thead>
            <tr>{cells(head, 'th')}</tr>
          </thead>
          <tbody>
            {rows.map((row, i) => (
              <tr key={i}>{cells(row, 'td')}</tr>
            ))}
          </tbody>
        </table>
      );
    }
    case 'link':
      return <SafeLink url={node.url}>{kids()}</SafeLink>;
    case 'image':
      return <SafeLink url={node.url}>{node.alt || node.url}</SafeLink>;
    case 'linkReference':
    case 'imageReference':
    case 'definition':
    case 'footnoteReference':
    case 'footnoteDefinition':
      return node.label ? `[${node.label}]` : null;
    default: {
      const Tag = BLOCK[node.type] || 'span';
      return Tag === 'hr' || Tag === 'br' ? <Tag /> : <Tag>{kids()}</Tag>;
    }
  }
}

export function Markdown({ text }) {
  let tree;
  try {
    tree = fromMarkdown(text, { extensions: [gfm()], mdastExtensions: [gfmFromMarkdown()] });
  } catch {
    return <p className="text">{text}</p>;
  }
  return (
    <div className="text markdown">
      {tree.children.map((node, i) => (
        <Node key={i} node={node} />
      ))}
    </div>
  );
}
