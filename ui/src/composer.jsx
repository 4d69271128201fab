// The message box, shared by a conversation and the empty page that starts one: Enter sends,
// Shift+Enter starts a new line (never mid-composition, for input methods); the buttons are
// the caller's.

export function Composer({ value, onChange, onSubmit, children }) {
  return (
    <form
      id="composer"
      className="composer"
      onSubmit={e => {
        e.preventDefault();
        onSubmit(value.trim());
      }}
    >
      <label htmlFor="input" className="visually-hidden">
        Your message
      </label>
      <textarea
        id="input"
        rows={2}
        placeholder="Message the agent"
        title="Enter sends; Shift+Enter starts a new line; Esc cancels the turn"
        required
        value={value}
        onChange={e => onChange(e.target.value)}
        onKeyDown={e => {
          if (e.key === 'Enter' && !e.shiftKey && !e.nativeEvent.isComposing) {
            e.preventDefault();
            e.currentTarget.form.requestSubmit();
          }
        }}
      />
      {children}
    </form>
  );
}
